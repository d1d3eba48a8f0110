// SPDX-License-Identifier: BSD-3-Clause
// Leased locks on LOCK.ACQUIRE / LOCK.RELEASE / LOCK.EXTEND / LOCK.INSPECT: Lock (a mutex),
// Semaphore (n permits, a pool whose size can change), ReadWriteLock (shared or exclusive
// holds). One instance is one holder with its own owner string, fencing token and renewal timer.
// The wait for a held lock happens on the server (LOCK.ACQUIRE ... WAIT, first come first
// served) on a dedicated connection; renewal is a timer that sends LOCK.EXTEND every
// renewEveryMs while held, and a lock found lost is never silent (lost, onLost, signal, LockLost).
// All times are milliseconds.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const { randomUUID } = require('node:crypto');
const { Adapter } = require('./adapter');
const {
  McaptchaCacheError, LockError, LockLost, LockNotAcquired, LockNotOwned, WrongType,
} = require('./errors');
const {
  checkInt, checkMs, checkWaitMs, now, pause, sendBlocking, throwIfAborted, WaitBudget, WaitTimeout,
} = require('./wait');

const noop = () => {};

/** LOCK.INSPECT's reply as an object, or null for a missing key. */
function parseInspect(reply) {
  if (reply == null) return null;
  const holders = (reply[3] || []).map((h) => ({
    owner: String(h[0]), leaseMs: Number(h[1]), token: Number(h[2]), count: Number(h[3]),
    lockDelay: Number(h[3]) === 0,
  }));
  return {
    permits: Number(reply[0]), lastToken: Number(reply[1]), waiters: Number(reply[2]), holders,
    adjustment: reply.length >= 6 ? Number(reply[4]) : 0,
    size: reply.length >= 6 ? Number(reply[5]) : null,
  };
}

class Lock {
  /**
   * new Lock(client, name, { leaseMs, waitMs, session, autoRenew, renewEveryMs, onLost, owner,
   * lockDelayMs }): a leased mutex at key `name`. waitMs: how long acquire() waits on the
   * server (0: try once; undefined/null/Infinity: without end). renewEveryMs defaults to
   * leaseMs / 3.
   */
  constructor(client, name, options = {}) {
    this.client = client;
    this._ad = Adapter.of(client);
    if (name == null || name === '') throw new TypeError('a lock needs a name (its key)');
    this.name = name;
    const o = options || {};
    this.leaseMs = checkMs('leaseMs', o.leaseMs);
    this.waitMs = checkWaitMs(o.waitMs);
    this.session = Boolean(o.session);
    this.autoRenew = o.autoRenew !== false;
    this.renewEveryMs = null;
    if (this.autoRenew) {
      this.renewEveryMs = o.renewEveryMs == null ? Math.max(1, Math.floor(this.leaseMs / 3)) : checkMs('renewEveryMs', o.renewEveryMs);
      if (this.renewEveryMs >= this.leaseMs) {
        throw new RangeError(`renewEveryMs (${this.renewEveryMs}) must be below leaseMs (${this.leaseMs})`);
      }
    }
    this.onLost = o.onLost || null;
    this.owner = o.owner != null ? String(o.owner) : randomUUID().replace(/-/g, '');
    this.lockDelayMs = o.lockDelayMs == null ? null : checkMs('lockDelayMs', o.lockDelayMs, 0);
    /** The fencing token of the last grant (a number that grows with every grant). */
    this.token = null;
    this._permits = null; // null: a mutex (no PERMITS argument)
    this._take = 1;
    this._mode = null;    // null, 'READ' or 'WRITE'
    this._held = false;
    this._lost = false;
    this._lostReason = null;
    this._lossReported = false;
    this._gen = 0;        // renewal generation: a timer of an older one does nothing
    this._timer = null;
    this._renewing = null;
    this._conn = null;    // the dedicated connection a session lock holds
    this._leaseDeadline = 0;
    this._controller = null;
  }

  /** True from a grant until release(), or until the lock is found lost. */
  get held() { return this._held; }
  /** True once a lock this instance held was found lost (until the next acquire). */
  get lost() { return this._lost; }
  /** Why the lock was found lost, or null. */
  get lostReason() { return this._lostReason; }
  /** An AbortSignal of the current hold: aborted when it ends (released, or lost: reason LockLost). */
  get signal() { return this._controller ? this._controller.signal : null; }
  /** The semaphore's size (1 for a lock). */
  get permits() { return this._permits === null ? 1 : this._permits; }

  // ----------------------------------------------------------------- commands
  /** The key the commands are routed by (checks a MultiLock's keys before anything is sent). */
  _route() { return this._ad.key(this.name); }

  _acquireArgs(wait) {
    const a = ['LOCK.ACQUIRE', this._ad.key(this.name), this.owner, this.leaseMs];
    if (this._permits !== null) {
      a.push('PERMITS', this._permits);
      if (this._take > 1) a.push('TAKE', this._take);
    }
    if (this.session) a.push('SESSION');
    if (this.lockDelayMs) a.push('LOCKDELAY', this.lockDelayMs);
    if (this._mode) a.push(this._mode);
    if (wait > 0) a.push('WAIT', wait);
    return a;
  }

  _releaseArgs() { return ['LOCK.RELEASE', this._ad.key(this.name), this.owner]; }
  _extendArgs(ms) { return ['LOCK.EXTEND', this._ad.key(this.name), this.owner, ms]; }
  /** Why a release's reply shows part of the hold was gone already (null: it was not). */
  _releaseMissed() { return null; }

  // ------------------------------------------------------------------ acquire
  /**
   * Acquire: resolves true when granted, false when the wait ran out. opts.waitMs overrides the
   * instance's; opts.signal (an AbortSignal) stops a wait (the promise rejects with its reason
   * and the server forgets the waiter). Rejects with LockError if this instance holds it
   * already, PermitsMismatch, WrongType, CrossSlot (MultiLock).
   */
  async acquire(opts = {}) {
    if (this._held) throw new LockError(`${String(this.name)} is already held by this instance; release it first`);
    const wait = opts.waitMs === undefined ? this.waitMs : checkWaitMs(opts.waitMs);
    const signal = opts.signal;
    throwIfAborted(signal);
    const route = this._route();
    await this._stopRenewal();
    this._dropConn(false);
    this._lost = false;
    this._lostReason = null;
    this._lossReported = false;
    const ad = this._ad;
    const budget = new WaitBudget(wait);
    let raw = null;
    try {
      for (;;) {
        const rnd = budget.nextRoundMs();
        if ((rnd > 0 || this.session) && !raw) raw = await ad.dedicated();
        throwIfAborted(signal);
        const started = now();
        let reply;
        try {
          reply = rnd > 0
            ? await sendBlocking(ad, raw, this._acquireArgs(rnd), route, rnd, signal)
            : await ad.send(this._acquireArgs(0), route, raw || undefined);
        } catch (e) {
          // no error reply: a grant may have been made (aborted, connection lost); undo it
          if (!(e instanceof McaptchaCacheError) || e instanceof WaitTimeout) {
            await ad.send(this._releaseArgs(), route).catch(noop);
          }
          throw e;
        }
        if (Number(reply[0]) === 1) {
          this.token = Number(reply[1]);
          this._leaseDeadline = started + Number(reply[2]);
          this._held = true;
          this._controller = new AbortController();
          if (this.session) {
            this._conn = raw;
            raw = null;
          }
          this._startRenewal();
          return true;
        }
        if (budget.expired()) return false;
        if (rnd > 0 && now() - started < rnd / 2) await pause(10); // answered early: never spin
      }
    } finally {
      if (raw && !raw.__dead) ad.giveBack(raw);
    }
  }

  /** acquire(), rejecting with LockNotAcquired when the wait runs out; resolves to this lock. */
  async acquireOrThrow(opts = {}) {
    if (!(await this.acquire(opts))) {
      const w = opts.waitMs === undefined ? this.waitMs : opts.waitMs;
      throw new LockNotAcquired(`could not acquire ${String(this.name)} within ${w} ms`);
    }
    return this;
  }

  /**
   * Acquire (or reject with LockNotAcquired), run fn(this), release in any case; resolves to
   * fn's result. If fn succeeded but the lock was lost meanwhile, rejects with LockLost.
   */
  async run(fn, opts = {}) {
    await this.acquireOrThrow(opts);
    let result;
    try {
      result = await fn(this);
    } catch (e) {
      await this.dispose().catch(noop);
      throw e;
    }
    await this.dispose();
    return result;
  }

  // ------------------------------------------------------------------ release
  _notHeld() {
    if (this._lost) {
      this._lossReported = true;
      return new LockLost(`lock ${String(this.name)} was lost while held: ${this._lostReason}`);
    }
    return new LockNotOwned(`lock ${String(this.name)} is not held by this instance`);
  }

  /**
   * Release (the longest waiter gets it). The renewal timer is stopped and a renewal in flight
   * awaited first, so no renewal follows the release. Rejects with LockLost if the lock was
   * lost while held, LockNotOwned if this instance does not hold it; on a connection error the
   * lock stays held (its lease ends by itself unless release() is retried).
   */
  async release() {
    await this._stopRenewal();
    if (!this._held) {
      this._dropConn(false);
      throw this._notHeld();
    }
    let reply;
    try {
      reply = await this._ad.send(this._releaseArgs(), this._route(), this._conn || undefined);
    } catch (e) {
      if (e instanceof LockNotOwned || e instanceof WrongType) {
        this._markLost(`the server answered the release: ${e.message}`);
        throw this._notHeld();
      }
      this._startRenewal();
      throw e;
    }
    const missed = this._releaseMissed(reply);
    if (missed) {
      this._markLost(`the server answered the release: ${missed}`);
      throw this._notHeld();
    }
    this._held = false;
    this._endHold(null);
    this._dropConn(true);
  }

  /**
   * Release if held; reject with LockLost if the lock was lost and that was not reported yet;
   * else nothing. What `await using` calls (Symbol.asyncDispose), and a `finally` may.
   */
  async dispose() {
    if (this._held) return this.release();
    if (this._lost && !this._lossReported) throw this._notHeld();
    return undefined;
  }

  /**
   * Renew the lease to end `ms` from now (default leaseMs); resolves to the new lease (ms). A
   * one-off: the timer keeps renewing to leaseMs. Rejects with LockLost when the server no
   * longer has it for this owner.
   */
  async extend(ms = this.leaseMs) {
    checkMs('ms', ms);
    if (!this._held) throw this._notHeld();
    const sent = now();
    let lease;
    try {
      lease = Number(await this._ad.send(this._extendArgs(ms), this._route()));
    } catch (e) {
      if (e instanceof LockNotOwned || e instanceof WrongType) {
        this._markLost(`the server refused the extension: ${e.message}`);
        throw this._notHeld();
      }
      throw e;
    }
    this._leaseDeadline = sent + lease;
    return lease;
  }

  // ------------------------------------------------------------------ queries
  /** LOCK.INSPECT: {permits, lastToken, waiters, holders: [{owner, leaseMs, token, count, lockDelay}], adjustment, size} or null. */
  async inspect() {
    return parseInspect(await this._ad.send(['LOCK.INSPECT', this._ad.key(this.name)], this._route()));
  }

  /** Whether the server lists this owner among the holders (a held lock that it does not is marked lost). */
  async owned() {
    const info = await this.inspect();
    const mine = info !== null && info.holders.some((h) => h.owner === this.owner && !h.lockDelay);
    if (this._held && !mine) this._markLost('LOCK.INSPECT does not list this owner');
    return mine;
  }

  /** Whether any permit is taken (by a holder or a lock-delay). */
  async locked() {
    const info = await this.inspect();
    return info !== null && info.holders.length > 0;
  }

  // ------------------------------------------------------------------ renewal
  _startRenewal() {
    if (!this.autoRenew || !this._held) return;
    const gen = ++this._gen;
    const schedule = () => {
      this._timer = setTimeout(tick, this.renewEveryMs);
      if (this._timer.unref) this._timer.unref();
    };
    const tick = () => {
      this._timer = null;
      if (gen !== this._gen || !this._held) return;
      this._renewing = this._renewOnce().finally(() => {
        this._renewing = null;
        if (gen === this._gen && this._held) schedule();
      });
    };
    schedule();
  }

  async _renewOnce() {
    const sent = now();
    try {
      const lease = Number(await this._ad.send(this._extendArgs(this.leaseMs), this._route()));
      this._leaseDeadline = sent + lease;
    } catch (e) {
      if (e instanceof LockNotOwned || e instanceof WrongType) {
        this._markLost(`renewal refused: ${e.message}`);
      } else if (now() >= this._leaseDeadline) {
        // connection errors, OOM, READONLY, ...: retried until the lease has run out
        this._markLost(`renewals failed until the lease ended: ${e.message}`);
      }
    }
  }

  async _stopRenewal() {
    this._gen++;
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    const r = this._renewing;
    if (r) await r.catch(noop);
  }

  _endHold(reason) {
    const c = this._controller;
    if (c && !c.signal.aborted) c.abort(reason || new LockError(`lock ${String(this.name)} released`));
  }

  _markLost(reason) {
    if (!this._held) return;
    this._held = false;
    this._lost = true;
    this._lostReason = reason;
    this._gen++;
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    this._dropConn(false);
    const err = new LockLost(`lock ${String(this.name)} (owner ${this.owner}, token ${this.token}) lost: ${reason}`);
    this._endHold(err);
    if (this.onLost) {
      try {
        const r = this.onLost(this, err);
        if (r && typeof r.catch === 'function') r.catch(noop);
      } catch (_) { /* a failing callback does not stop the loss being recorded */ }
    }
  }

  /** Give back (healthy) or close the dedicated connection of a session lock. */
  _dropConn(healthy) {
    const c = this._conn;
    this._conn = null;
    if (!c) return;
    if (healthy && !c.__dead) this._ad.giveBack(c);
    else this._ad.destroy(c);
  }

  toString() {
    return `${this.constructor.name}(${String(this.name)}, owner=${this.owner}, held=${this._held}, lost=${this._lost}, token=${this.token})`;
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Lock.prototype[Symbol.asyncDispose] = function asyncDispose() { return this.dispose(); };
}

function checkPermits(name, v) {
  return checkInt(name, v, 1, 1024);
}

class Semaphore extends Lock {
  /**
   * new Semaphore(client, name, { permits, take = 1, leaseMs, ...Lock's options }): at most
   * `permits` holders at once (LOCK.ACQUIRE ... PERMITS n), this one taking `take` of them
   * (all or none). Every holder must pass the same permits (else PermitsMismatch).
   */
  constructor(client, name, options = {}) {
    super(client, name, options);
    this._permits = checkPermits('permits', options.permits);
    this._take = checkPermits('take', options.take === undefined ? 1 : options.take);
    if (this._take > this._permits) throw new RangeError(`take (${this._take}) must not exceed permits (${this._permits})`);
  }

  async _pool(cmd, ...args) {
    return Number(await this._ad.send([cmd, this._ad.key(this.name), ...args, 'PERMITS', this._permits], this._route()));
  }

  /** LOCK.ADD_PERMITS: change the pool's size by delta (-1024..1024); resolves to the size after. */
  addPermits(delta) {
    return this._pool('LOCK.ADD_PERMITS', checkInt('delta', delta, -1024, 1024));
  }

  /** LOCK.DRAIN_PERMITS: take every free permit out of the pool; resolves to how many. */
  drainPermits() { return this._pool('LOCK.DRAIN_PERMITS'); }

  /** LOCK.AVAILABLE_PERMITS: the permits free now. */
  availablePermits() { return this._pool('LOCK.AVAILABLE_PERMITS'); }
}

class ReadWriteLock {
  /** new ReadWriteLock(client, name, Lock's options): readLock() and writeLock() make holders. */
  constructor(client, name, options = {}) {
    this.client = client;
    this.name = name;
    this.options = { ...options };
  }

  _make(mode) {
    const l = new Lock(this.client, this.name, this.options);
    l._mode = mode;
    return l;
  }

  /** A new Lock taking a shared hold (LOCK.ACQUIRE ... READ). */
  readLock() { return this._make('READ'); }
  /** A new Lock taking the exclusive hold (LOCK.ACQUIRE ... WRITE). */
  writeLock() { return this._make('WRITE'); }
}

module.exports = { Lock, Semaphore, ReadWriteLock, parseInspect };
