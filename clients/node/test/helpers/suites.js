// The test suites every client library runs, standalone and on Cluster: locks (waiting on the
// server, renewal, loss, abort, semaphores, multi-key locks) and rate limiters (GCRA, window,
// cost, wait, policies). `env` is filled by the caller's before() hook: {client, lib, cluster}.
// Tests wait for states (a waiter queued, a renewal seen, a loss noticed), never for a time.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const assert = require('node:assert/strict');
const { it } = require('node:test');
const m = require('../../lib');
const { Adapter } = require('../../lib/adapter');
const { waitFor } = require('./servers');
const { commandCalls, cmd } = require('./clients');

// every warning of this process (visitInfo() deprecated: emitted once per process, so the
// suite of the second client library finds the one the first emitted)
const warnings = [];
process.on('warning', (w) => warnings.push(w));

let seq = 0;
/** A fresh key for one test (its own hash slot most of the time). */
function fresh(env, what) {
  seq += 1;
  return `${what}:${env.lib}:${env.cluster ? 'c' : 's'}:${process.pid}:${seq}`;
}

/** Whether nobody holds the lock (the key may stay, keeping its fencing token). */
async function free(lock) {
  const info = await lock.inspect();
  return info === null || info.holders.length === 0;
}

async function waiters(lock) {
  const info = await lock.inspect();
  return info === null ? 0 : info.waiters;
}

function lockTests(env) {
  it('acquires and releases; fencing tokens grow', async () => {
    const name = fresh(env, 'lock');
    const a = new m.Lock(env.client, name, { leaseMs: 5000 });
    assert.equal(await a.acquire(), true);
    assert.equal(a.held, true);
    assert.equal(typeof a.token, 'number');
    assert.ok(a.token > 0);
    const info = await a.inspect();
    assert.equal(info.holders.length, 1);
    assert.equal(info.holders[0].owner, a.owner);
    assert.equal(info.holders[0].token, a.token);
    assert.ok(info.holders[0].leaseMs > 4000 && info.holders[0].leaseMs <= 5000);
    await a.release();
    assert.equal(a.held, false);
    assert.ok(await free(a));
    const b = new m.Lock(env.client, name, { leaseMs: 5000 });
    assert.equal(await b.acquire(), true);
    assert.ok(b.token > a.token, `token ${b.token} after ${a.token}`);
    await b.release();
  });

  it('a second holder waits on the server (one blocked command) and is served at the release', async () => {
    const name = fresh(env, 'lock');
    const a = new m.Lock(env.client, name, { leaseMs: 10000 });
    const b = new m.Lock(env.client, name, { leaseMs: 10000, waitMs: 20000 });
    await a.acquire();
    const before = await commandCalls(env.client, 'lock.acquire');
    const pending = b.acquire();
    await waitFor(async () => (await waiters(a)) === 1, { what: 'the waiter queued on the server' });
    assert.equal(b.held, false);
    await a.release();
    assert.equal(await pending, true);
    assert.ok(b.token > a.token);
    assert.equal(await commandCalls(env.client, 'lock.acquire'), before + 1, 'the wait is one command, no polling');
    await b.release();
  });

  it('a wait runs out after waitMs on the server; acquireOrThrow rejects with LockNotAcquired', async () => {
    const name = fresh(env, 'lock');
    const a = new m.Lock(env.client, name, { leaseMs: 10000 });
    await a.acquire();
    const b = new m.Lock(env.client, name, { leaseMs: 1000, waitMs: 250 });
    const before = await commandCalls(env.client, 'lock.acquire');
    const t0 = Date.now();
    assert.equal(await b.acquire(), false);
    assert.ok(Date.now() - t0 >= 240, `gave up after ${Date.now() - t0} ms`);
    assert.equal(await commandCalls(env.client, 'lock.acquire'), before + 1);
    assert.equal(await b.acquire({ waitMs: 0 }), false);
    await assert.rejects(b.acquireOrThrow({ waitMs: 0 }), m.LockNotAcquired);
    await a.release();
  });

  it('renews the lease while held: it outlives leaseMs several times', async () => {
    const name = fresh(env, 'lock');
    // A renewal may come late by up to leaseMs - renewEveryMs before the lease runs out (an
    // upper bound on the timer's delay): 900 ms here, as a loaded machine can delay a timer
    // by more than the 240 ms that 300/60 left.
    const leaseMs = 1000;
    const a = new m.Lock(env.client, name, { leaseMs, renewEveryMs: 100 });
    const granted = Date.now();
    await a.acquire();
    // observe renewals: the lease left on the server goes up again, three times
    let seen = 0;
    let last = leaseMs;
    await waitFor(async () => {
      const info = await a.inspect();
      assert.ok(info !== null, 'the lock disappeared: its lease was not renewed');
      const left = info.holders[0].leaseMs;
      if (left > last) seen += 1;
      last = left;
      return seen >= 3 && Date.now() - granted > 2 * leaseMs;
    }, { what: 'three renewals', intervalMs: 20 });
    assert.equal(await a.owned(), true);
    assert.equal(a.held, true);
    const other = new m.Lock(env.client, name, { leaseMs: 1000 });
    assert.equal(await other.acquire({ waitMs: 0 }), false);
    await a.release();
    assert.equal(await other.acquire({ waitMs: 0 }), true);
    await other.release();
  });

  it('a lost lock is noticed: lost, onLost, signal aborted, release rejects with LockLost', async () => {
    const name = fresh(env, 'lock');
    const calls = [];
    const a = new m.Lock(env.client, name, { leaseMs: 2000, renewEveryMs: 30, onLost: (l, e) => calls.push(e) });
    await a.acquire();
    const signal = a.signal;
    assert.equal(signal.aborted, false);
    await cmd(env.client, ['DEL', name], name);
    await waitFor(() => a.lost, { what: 'the loss noticed by the renewal' });
    assert.equal(a.held, false);
    assert.equal(calls.length, 1);
    assert.ok(calls[0] instanceof m.LockLost);
    assert.ok(signal.aborted);
    assert.ok(signal.reason instanceof m.LockLost);
    assert.match(a.lostReason, /renewal refused/);
    await assert.rejects(a.release(), m.LockLost);
    await a.dispose(); // the loss was reported: nothing more
  });

  it('extend renews once; extend of a lost lock rejects with LockLost', async () => {
    const name = fresh(env, 'lock');
    const a = new m.Lock(env.client, name, { leaseMs: 1000, autoRenew: false });
    await a.acquire();
    const lease = await a.extend(60000);
    assert.ok(lease > 59000 && lease <= 60000, `lease ${lease}`);
    const info = await a.inspect();
    assert.ok(info.holders[0].leaseMs > 59000);
    await cmd(env.client, ['DEL', name], name);
    await assert.rejects(a.extend(), m.LockLost);
    assert.equal(a.lost, true);
  });

  it('an AbortSignal stops a wait: the server forgets the waiter and never grants it', async () => {
    const name = fresh(env, 'lock');
    const a = new m.Lock(env.client, name, { leaseMs: 10000 });
    await a.acquire();
    const b = new m.Lock(env.client, name, { leaseMs: 10000, waitMs: 30000 });
    const ac = new AbortController();
    const pending = b.acquire({ signal: ac.signal });
    await waitFor(async () => (await waiters(a)) === 1, { what: 'the waiter queued' });
    ac.abort();
    await assert.rejects(pending, (e) => e.name === 'AbortError');
    await waitFor(async () => (await waiters(a)) === 0, { what: 'the waiter gone' });
    await a.release();
    assert.ok(await free(a), 'nobody holds it after the release');
    assert.equal(b.held, false);
    const ac2 = new AbortController();
    ac2.abort();
    await assert.rejects(b.acquire({ signal: ac2.signal }), (e) => e.name === 'AbortError');
  });

  it('run() and Symbol.asyncDispose release the lock', async () => {
    const name = fresh(env, 'lock');
    const a = new m.Lock(env.client, name, { leaseMs: 5000 });
    const v = await a.run(async (l) => {
      assert.equal(l.held, true);
      assert.equal(await l.owned(), true);
      return 42;
    });
    assert.equal(v, 42);
    assert.ok(await free(a));
    await assert.rejects(a.run(async () => { throw new Error('boom'); }), /boom/);
    assert.ok(await free(a));
    if (typeof Symbol.asyncDispose === 'symbol') {
      await a.acquireOrThrow();
      await a[Symbol.asyncDispose]();
      assert.ok(await free(a));
    }
  });

  it('typed errors: WrongType, LockNotOwned, already held', async () => {
    const name = fresh(env, 'str');
    await cmd(env.client, ['SET', name, 'x'], name);
    await assert.rejects(new m.Lock(env.client, name, { leaseMs: 1000 }).acquire(), m.WrongType);
    const l = new m.Lock(env.client, fresh(env, 'lock'), { leaseMs: 1000 });
    await assert.rejects(l.release(), m.LockNotOwned);
    await l.acquire();
    await assert.rejects(l.acquire(), m.LockError);
    await l.release();
  });

  it('a semaphore admits permits holders; the pool can grow', async () => {
    const name = fresh(env, 'sem');
    const mk = () => new m.Semaphore(env.client, name, { permits: 2, leaseMs: 5000 });
    const s1 = mk();
    const s2 = mk();
    const s3 = mk();
    assert.equal(await s1.acquire(), true);
    assert.equal(await s2.acquire(), true);
    assert.equal(await s3.acquire({ waitMs: 0 }), false);
    assert.equal(await s3.availablePermits(), 0);
    const pending = s3.acquire({ waitMs: 20000 });
    await waitFor(async () => (await waiters(s1)) === 1, { what: 'the semaphore waiter' });
    assert.equal(await s1.addPermits(1), 3);
    assert.equal(await pending, true);
    await Promise.all([s1.release(), s2.release(), s3.release()]);
    assert.equal(await s1.availablePermits(), 3);
  });

  it('read-write lock: readers share, a writer waits', async () => {
    const rw = new m.ReadWriteLock(env.client, fresh(env, 'rw'), { leaseMs: 5000 });
    const r1 = rw.readLock();
    const r2 = rw.readLock();
    const w = rw.writeLock();
    assert.equal(await r1.acquire(), true);
    assert.equal(await r2.acquire({ waitMs: 0 }), true);
    assert.equal(await w.acquire({ waitMs: 0 }), false);
    await r1.release();
    await r2.release();
    assert.equal(await w.acquire({ waitMs: 0 }), true);
    await w.release();
  });

  it('MultiLock takes keys of one slot all or none, with one token', async () => {
    const tag = fresh(env, 'acct');
    const keys = [`{${tag}}:1`, `{${tag}}:2`];
    const ml = new m.MultiLock(env.client, keys, { leaseMs: 5000 });
    assert.equal(await ml.acquire(), true);
    for (const k of keys) {
      const info = await new m.Lock(env.client, k, { leaseMs: 1000 }).inspect();
      assert.equal(info.holders[0].token, ml.token);
      assert.equal(info.holders[0].owner, ml.owner);
    }
    assert.equal(await new m.Lock(env.client, keys[1], { leaseMs: 1000 }).acquire({ waitMs: 0 }), false);
    await ml.release();
    assert.ok(await free(new m.Lock(env.client, keys[1], { leaseMs: 1000 })));
  });

  it('MultiLock over keys of different slots rejects with CrossSlot before sending anything', async () => {
    const a = fresh(env, 'x');
    let b = fresh(env, 'y');
    while (m.keySlot(b) === m.keySlot(a)) b = fresh(env, 'y');
    const before = await commandCalls(env.client, 'lock.acquire_all');
    const ml = new m.MultiLock(env.client, [a, b], { leaseMs: 1000 });
    await assert.rejects(ml.acquire(), (e) => e instanceof m.CrossSlot && e.reply === undefined && e.slots.length === 2);
    assert.equal(await commandCalls(env.client, 'lock.acquire_all'), before);
  });

  it('a session lock acquires and releases on its own connection', async () => {
    const name = fresh(env, 'sess');
    const a = new m.Lock(env.client, name, { leaseMs: 5000, session: true });
    assert.equal(await a.acquire({ waitMs: 0 }), true);
    const full = await cmd(env.client, ['LOCK.INSPECT', name, 'FULL'], name);
    assert.ok(JSON.stringify(full).includes('"session"'));
    await a.release();
    assert.ok(await free(a));
    // the hold lives as long as that connection: closing it releases the lock on the server
    const b = new m.Lock(env.client, name, { leaseMs: 60000, session: true, renewEveryMs: 30 });
    assert.equal(await b.acquire({ waitMs: 0 }), true);
    Adapter.of(env.client).destroy(b._conn);
    await waitFor(() => free(b), { what: 'the release on disconnect' });
    await waitFor(() => b.lost, { what: 'the loss noticed' });
  });
}

function limiterTests(env) {
  it('GCRA: burst at once, then refused with the emission interval as retry', async () => {
    // 5 per minute: one unit back every 12 s, which no slow machine spends between these
    // calls (5 per second gave one back after 200 ms). Time passing between the calls takes
    // off the retry and the reset: at most what the clock shows (el, measured from before
    // the first call); a small slack for the clocks' millisecond rounding.
    const rl = new m.RateLimiter(env.client, { algorithm: 'gcra', rate: 5, periodMs: 60000, burst: 5, prefix: fresh(env, 'g') });
    const t0 = Date.now();
    for (let i = 4; i >= 0; i--) {
      const d = await rl.limit('u');
      assert.equal(d.allowed, true);
      assert.equal(d.remaining, i);
      assert.equal(d.retryAfterMs, -1);
      assert.ok(d.resetAfterMs > 0 && d.resetAfterMs <= 60000, `resetAfterMs ${d.resetAfterMs}`);
    }
    const d = await rl.limit('u');
    const el = Date.now() - t0 + 5;
    assert.equal(d.allowed, false);
    assert.equal(d.remaining, 0);
    assert.ok(d.retryAfterMs >= 12000 - el && d.retryAfterMs <= 12000, `retryAfterMs ${d.retryAfterMs} (${el} ms elapsed)`);
    assert.ok(d.resetAfterMs >= 60000 - el && d.resetAfterMs <= 60000, `resetAfterMs ${d.resetAfterMs} (${el} ms elapsed)`);
  });

  it('window: at most limit within the window; retry when the oldest leaves it', async () => {
    const rl = new m.RateLimiter(env.client, { limit: 3, windowMs: 60000, prefix: fresh(env, 'w') });
    assert.equal(rl.algorithm, 'window');
    for (const left of [2, 1, 0]) {
      const d = await rl.limit('u');
      assert.deepEqual([d.allowed, d.remaining, d.retryAfterMs], [true, left, -1]);
      assert.ok(d.resetAfterMs > 59000 && d.resetAfterMs <= 61000, `resetAfterMs ${d.resetAfterMs}`);
    }
    const d = await rl.limit('u');
    assert.equal(d.allowed, false);
    assert.ok(d.retryAfterMs > 59000 && d.retryAfterMs <= 61000, `retryAfterMs ${d.retryAfterMs}`);
    assert.ok(d.resetAfterMs >= d.retryAfterMs);
    await assert.rejects(rl.limitOrThrow('u'), (e) => e instanceof m.RateLimited && e.decision.allowed === false);
  });

  it('cost: weighted requests, and a cost that can never fit', async () => {
    const rl = new m.RateLimiter(env.client, { limit: 10, windowMs: 60000, prefix: fresh(env, 'c') });
    assert.equal((await rl.limit('u', { cost: 4 })).remaining, 6);
    const refused = await rl.limit('u', { cost: 7 });
    assert.equal(refused.allowed, false);
    assert.ok(refused.retryAfterMs > 0);
    const never = await rl.limit('u', { cost: 11, waitMs: 5000 });
    assert.equal(never.allowed, false);
    assert.equal(never.retryAfterMs, -1);
    assert.equal((await rl.limit('u', { cost: 6 })).remaining, 0);
  });

  it('wait: one blocked command on the server until the units fit', async () => {
    const rl = new m.RateLimiter(env.client, { limit: 1, windowMs: 400, prefix: fresh(env, 'wait') });
    // from before the first hit: the wait is served when that hit leaves the window, 400 ms
    // after it, however long the calls in between took (a lower bound load cannot break;
    // 10 ms of slack for the clocks' rounding)
    const t0 = Date.now();
    assert.equal((await rl.limit('u')).allowed, true);
    const before = await commandCalls(env.client, 'rl.window');
    const d = await rl.limit('u', { waitMs: 10000 });
    assert.equal(d.allowed, true);
    assert.ok(Date.now() - t0 >= 390, `served ${Date.now() - t0} ms after the first hit`);
    assert.equal(await commandCalls(env.client, 'rl.window'), before + 1, 'one command, no polling');
    // a wait shorter than the retry runs out on the server
    const short = new m.RateLimiter(env.client, { limit: 1, windowMs: 60000, prefix: fresh(env, 'wait') });
    await short.limit('u');
    const t1 = Date.now();
    const r = await short.limit('u', { waitMs: 200 });
    assert.equal(r.allowed, false);
    assert.ok(Date.now() - t1 >= 190, `gave up after ${Date.now() - t1} ms`);
  });

  it('an AbortSignal stops a limiter wait', async () => {
    const rl = new m.RateLimiter(env.client, { limit: 1, windowMs: 60000, prefix: fresh(env, 'ab') });
    await rl.limit('u');
    const ac = new AbortController();
    const pending = rl.limit('u', { waitMs: 30000, signal: ac.signal });
    const t0 = Date.now();
    setImmediate(() => ac.abort());
    await assert.rejects(pending, (e) => e.name === 'AbortError');
    assert.ok(Date.now() - t0 < 10000);
  });

  it('peek, refund and reset', async () => {
    const rl = new m.RateLimiter(env.client, { limit: 3, windowMs: 60000, prefix: fresh(env, 'p') });
    await rl.limit('u', { cost: 2 });
    const p = await rl.peek('u');
    assert.deepEqual([p.allowed, p.remaining], [true, 0]);
    assert.equal((await rl.peek('u', { cost: 2 })).allowed, false);
    assert.equal(await rl.refund('u', 1), 1);
    assert.equal((await rl.peek('u', { cost: 2 })).allowed, true);
    assert.equal(await rl.reset('u'), true);
    assert.equal((await rl.peek('u', { cost: 3 })).allowed, true);
    assert.equal(await rl.reset('u'), false);
  });

  it('stored policies: set on every primary, used by name, deleted', async () => {
    const wname = fresh(env, 'pw');
    const gname = fresh(env, 'pg');
    await m.setWindowPolicy(env.client, wname, { limit: 2, windowMs: 60000 });
    await m.setGcraPolicy(env.client, gname, { rate: 10, periodMs: 1000, burst: 3 });
    assert.deepEqual(await m.getPolicy(env.client, wname), { algorithm: 'window', limit: 2, windowMs: 60000 });
    assert.deepEqual(await m.getPolicy(env.client, gname), { algorithm: 'gcra', rate: 10, periodMs: 1000, burst: 3 });
    assert.ok((await m.listPolicies(env.client)).includes(wname));
    const w = new m.RateLimiter(env.client, { algorithm: 'window', policy: wname, prefix: fresh(env, 'pk') });
    const g = new m.RateLimiter(env.client, { algorithm: 'gcra', policy: gname, prefix: fresh(env, 'pk') });
    // keys of many slots: in a cluster they live on every primary, each with the policy
    for (let i = 0; i < 6; i++) {
      assert.deepEqual([(await w.limit(`u${i}`)).remaining, (await w.limit(`u${i}`)).remaining], [1, 0]);
      assert.equal((await w.limit(`u${i}`)).allowed, false);
      assert.equal((await g.limit(`u${i}`, { cost: 3 })).remaining, 0);
    }
    assert.equal(await m.deletePolicy(env.client, wname), true);
    assert.equal(await m.deletePolicy(env.client, wname), false);
    await m.deletePolicy(env.client, gname);
    assert.equal(await m.getPolicy(env.client, wname), null);
    await assert.rejects(w.limit('u0'), m.InvalidArgument);
  });

  it('bad arguments: checked in the client, or typed from the server', async () => {
    assert.throws(() => new m.RateLimiter(env.client, { limit: 1.5, windowMs: 1000 }), TypeError);
    assert.throws(() => new m.RateLimiter(env.client, { policy: 'p', rate: 1 }), TypeError);
    const k = fresh(env, 'wt');
    await new m.Lock(env.client, k, { leaseMs: 5000, autoRenew: false }).acquire();
    await assert.rejects(new m.RateLimiter(env.client, { limit: 1, windowMs: 1000 }).limit(k), m.WrongType);
  });
}

function captchaTests(env) {
  it('captcha: levels, visits, challenges and typed errors', async () => {
    const c = new m.Captcha(env.client, fresh(env, 'site'));
    assert.equal(await c.exists(), false);
    await assert.rejects(c.visit(), m.CaptchaNotFound);
    await c.add([[50, 50], [500, 500]], 30);
    assert.equal(await c.exists(), true);
    await assert.rejects(c.add([[50, 50]], 30), m.CaptchaExists);
    await assert.rejects(new m.Captcha(env.client, fresh(env, 'bad')).add([[5, 0]], 30), m.InvalidCaptchaConfig);
    assert.equal(await c.visit(), 50);
    assert.deepEqual(await c.visitWithDuration(), { difficulty: 50, durationS: 30 });
    assert.equal(await c.count(), 2);
    await c.addChallenge('n0nce', 500, 30);
    await assert.rejects(c.addChallenge('n0nce', 500, 30), m.ChallengeExists);
    assert.deepEqual(await c.getChallenge('n0nce'), { difficulty: 500, durationS: 30 });
    await assert.rejects(c.getChallenge('n0nce'), m.ChallengeNotFound);
    await c.delete();
    assert.equal(await c.exists(), false);
  });

  it('captcha: count() counts nothing; visit() and visitWithDuration() count one visit; visitInfo() is deprecated', async () => {
    const c = new m.Captcha(env.client, fresh(env, 'site'));
    await c.add([[1, 10], [2, 20]], 30);
    assert.equal(await c.count(), 0);
    assert.equal(await c.count(), 0, 'a query: counts nothing');
    assert.deepEqual(await c.visitWithDuration(), { difficulty: 10, durationS: 30 });
    assert.equal(await c.count(), 1, 'one visit');
    assert.equal(await c.count(), 1, 'a query: counts nothing');
    assert.equal(await c.visit(), 10);
    assert.equal(await c.count(), 2, 'one visit more');
    // the old name still answers the same, and still counts (as the Python client's
    // visit_info()), with a DeprecationWarning once per process
    assert.deepEqual(await c.visitInfo(), { difficulty: 20, durationS: 30 });
    assert.equal(await c.count(), 3, 'visitInfo() counts a visit, as before');
    await new Promise((r) => setImmediate(r)); // process.emitWarning reports on the next tick
    assert.ok(warnings.some((w) => w.name === 'DeprecationWarning' && w.code === 'MCAPTCHA_CACHE_VISIT_INFO'
      && /visitWithDuration\(\)/.test(w.message)), 'visitInfo() emitted its DeprecationWarning');
  });
}

module.exports = { lockTests, limiterTests, captchaTests, fresh };
