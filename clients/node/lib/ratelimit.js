// SPDX-License-Identifier: BSD-3-Clause
// Rate limiters on the module's RL.GCRA (a GCRA token bucket: rate per period, burst at once)
// and RL.WINDOW (an exact sliding window: at most limit within any window), with a cost per
// request, a wait on the server (WAIT, first come first served) and stored policies
// (RL.POLICY_*). Every answer is a Decision {allowed, remaining, retryAfterMs, resetAfterMs},
// the module's [allowed, remaining, retry_after_ms, reset_after_ms]. All times are milliseconds.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const { Adapter } = require('./adapter');
const { RateLimited } = require('./errors');
const { checkInt, checkMs, checkWaitMs, now, pause, sendBlocking, throwIfAborted, WaitBudget } = require('./wait');

/** The module's 4-element reply as a Decision. */
function toDecision(reply) {
  return {
    allowed: Number(reply[0]) === 1,
    remaining: Number(reply[1]),
    retryAfterMs: Number(reply[2]),
    resetAfterMs: Number(reply[3]),
  };
}

const units = (name, v) => checkInt(name, v, 0);

class RateLimiter {
  /**
   * new RateLimiter(client, options):
   *   { algorithm: 'gcra', rate, periodMs, burst? }   RL.GCRA: rate units per periodMs, burst at once (default rate)
   *   { algorithm: 'window', limit, windowMs }        RL.WINDOW: at most limit units within any windowMs
   *   { algorithm, policy: 'name' }                   a stored policy's numbers (RL.POLICY_SET)
   * and prefix (default ''), put before every key. Without `algorithm`, windowMs or limit
   * means 'window', else 'gcra'.
   */
  constructor(client, options = {}) {
    this.client = client;
    this._ad = Adapter.of(client);
    const o = options || {};
    const algorithm = o.algorithm || (o.windowMs !== undefined || o.limit !== undefined ? 'window' : 'gcra');
    if (algorithm !== 'gcra' && algorithm !== 'window') throw new TypeError(`algorithm must be 'gcra' or 'window', got ${algorithm}`);
    this.algorithm = algorithm;
    this.prefix = o.prefix === undefined ? '' : String(o.prefix);
    const numbers = algorithm === 'gcra' ? { rate: o.rate, periodMs: o.periodMs, burst: o.burst } : { limit: o.limit, windowMs: o.windowMs };
    if (o.policy !== undefined && o.policy !== null) {
      if (typeof o.policy !== 'string' || o.policy === '') throw new TypeError('policy must be a non-empty string');
      const given = Object.keys(numbers).filter((k) => numbers[k] !== undefined);
      if (given.length) throw new TypeError(`policy replaces ${given.join(', ')}: give one or the other`);
      this.policy = o.policy;
    } else {
      this.policy = null;
      if (algorithm === 'gcra') {
        this.rate = units('rate', o.rate);
        this.periodMs = checkMs('periodMs', o.periodMs);
        this.burst = o.burst === undefined ? null : units('burst', o.burst);
      } else {
        this.limitUnits = units('limit', o.limit);
        this.windowMs = checkMs('windowMs', o.windowMs);
      }
    }
  }

  /** The key as sent (prefix, and ioredis' keyPrefix). */
  _key(key) { return this._ad.key(this.prefix + String(key)); }

  _limitArgs() {
    if (this.policy !== null) return ['POLICY', this.policy];
    return this.algorithm === 'gcra' ? [this.rate, this.periodMs] : [this.limitUnits, this.windowMs];
  }

  _args(cmd, k, cost) {
    const a = [cmd, k, ...this._limitArgs()];
    if (this.algorithm === 'gcra' && this.policy === null && this.burst !== null) a.push('BURST', this.burst);
    if (cost !== 1) a.push('COST', cost);
    return a;
  }

  /**
   * Take `cost` units (default 1) for `key`; resolves to a Decision. waitMs: 0 (default)
   * answers at once; N waits on the server up to N ms for the units to fit; null/Infinity
   * waits until they do. A cost that can never fit is refused at once (retryAfterMs -1).
   * signal: an AbortSignal that stops the wait.
   */
  async limit(key, opts = {}) {
    const cost = units('cost', opts.cost === undefined ? 1 : opts.cost);
    const wait = checkWaitMs(opts.waitMs === undefined ? 0 : opts.waitMs);
    const signal = opts.signal;
    throwIfAborted(signal);
    const k = this._key(key);
    const cmd = this.algorithm === 'gcra' ? 'RL.GCRA' : 'RL.WINDOW';
    const ad = this._ad;
    const budget = new WaitBudget(wait);
    let raw = null;
    try {
      for (;;) {
        const rnd = budget.nextRoundMs();
        const started = now();
        let d;
        if (rnd > 0) {
          if (!raw) raw = await ad.dedicated();
          d = toDecision(await sendBlocking(ad, raw, [...this._args(cmd, k, cost), 'WAIT', rnd], k, rnd, signal));
        } else {
          d = toDecision(await ad.send(this._args(cmd, k, cost), k));
        }
        if (d.allowed || d.retryAfterMs < 0 || budget.expired()) return d;
        if (rnd > 0 && now() - started < rnd / 2) await pause(10); // answered early: never spin
      }
    } finally {
      if (raw && !raw.__dead) ad.giveBack(raw);
    }
  }

  /** limit(), rejecting with RateLimited (carrying the Decision) when refused. */
  async limitOrThrow(key, opts = {}) {
    const d = await this.limit(key, opts);
    if (!d.allowed) throw new RateLimited(d, String(key));
    return d;
  }

  /** What limit(key, {cost}) would answer now, taking nothing (RL.*_PEEK; runs on replicas). */
  async peek(key, opts = {}) {
    const cost = units('cost', opts.cost === undefined ? 1 : opts.cost);
    const k = this._key(key);
    return toDecision(await this._ad.send(this._args(this.algorithm === 'gcra' ? 'RL.GCRA_PEEK' : 'RL.WINDOW_PEEK', k, cost), k));
  }

  /** RL.REFUND: give up to `n` units back (newest first, never below empty); resolves to the units given back. */
  async refund(key, n) {
    const k = this._key(key);
    return Number(await this._ad.send(['RL.REFUND', k, units('units', n)], k));
  }

  /** Forget the key's state (DEL); resolves to whether there was one. */
  async reset(key) {
    const k = this._key(key);
    return Number(await this._ad.send(['DEL', k], k)) > 0;
  }
}

// ------------------------------------------------------------------ stored policies
// Node-wide, not keys: with a Cluster client, set and delete go to every primary.

/** RL.POLICY_SET name GCRA rate periodMs [BURST burst], on every primary. */
async function setGcraPolicy(client, name, { rate, periodMs, burst } = {}) {
  const a = ['RL.POLICY_SET', name, 'GCRA', units('rate', rate), checkMs('periodMs', periodMs)];
  if (burst !== undefined && burst !== null) a.push('BURST', units('burst', burst));
  await Adapter.of(client).broadcast(a);
}

/** RL.POLICY_SET name WINDOW limit windowMs, on every primary. */
async function setWindowPolicy(client, name, { limit, windowMs } = {}) {
  await Adapter.of(client).broadcast(['RL.POLICY_SET', name, 'WINDOW', units('limit', limit), checkMs('windowMs', windowMs)]);
}

/** The policy: {algorithm: 'gcra', rate, periodMs, burst (null when not given)} or {algorithm: 'window', limit, windowMs}, or null. */
async function getPolicy(client, name) {
  const r = await Adapter.of(client).sendAny(['RL.POLICY_GET', name]);
  if (r == null) return null;
  if (String(r[0]).toUpperCase() === 'GCRA') {
    return { algorithm: 'gcra', rate: Number(r[1]), periodMs: Number(r[2]), burst: r.length >= 5 ? Number(r[4]) : null };
  }
  return { algorithm: 'window', limit: Number(r[1]), windowMs: Number(r[2]) };
}

/** Remove the policy (from every primary); resolves to whether there was one. */
async function deletePolicy(client, name) {
  const replies = await Adapter.of(client).broadcast(['RL.POLICY_DEL', name]);
  return replies.some((r) => Number(r) > 0);
}

/** The policy names, in byte order (of the first primary, in a cluster). */
async function listPolicies(client) {
  return (await Adapter.of(client).sendAny(['RL.POLICY_LIST'])).map(String);
}

module.exports = {
  RateLimiter, toDecision, setGcraPolicy, setWindowPolicy, getPolicy, deletePolicy, listPolicies,
};
