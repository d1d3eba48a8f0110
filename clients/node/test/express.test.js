// SPDX-License-Identifier: BSD-3-Clause
// The express-rate-limit stores in a real Express app on a free port, on both client
// libraries: the N+1-th request within the window gets 429 with the draft-standard RateLimit
// headers and a Retry-After that is right (the window admits the client again then, not
// before); decrement (skipFailedRequests) does not refund a refusal; resetKey and get. The same
// for FixedWindowStore (RL.FIXED, rate-limit-redis's semantics and counter format).
'use strict';

const assert = require('node:assert/strict');
const http = require('node:http');
const { describe, it, before, after } = require('node:test');
const express = require('express');
const { rateLimit } = require('express-rate-limit');
const m = require('../lib');
const { startStandalone, waitFor } = require('./helpers/servers');
const { LIBS, makeClient, closeClient, commandCalls, cmd } = require('./helpers/clients');

/** GET path on the app: {status, headers, body}. */
function get(port, path, client = 'c1') {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers: { 'x-client': client }, agent: false }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.on('error', reject);
  });
}

/** An Express app on a free port with the limiter in front of /ok and /fail. */
async function startApp(limiterOptions) {
  const app = express();
  const limiter = rateLimit({ keyGenerator: (req) => req.get('x-client') || 'anon', ...limiterOptions });
  app.use(limiter);
  app.get('/ok', (req, res) => res.send('ok'));
  app.get('/fail', (req, res) => res.status(500).send('fail'));
  const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
  return { limiter, port: server.address().port, close: () => new Promise((r) => server.close(r)) };
}

let seq = 0;

describe('express-rate-limit store', () => {
  let redis;
  before(async () => { redis = await startStandalone(); });
  after(async () => { if (redis) await redis.stop(); });

  for (const lib of LIBS) {
    describe(lib, () => {
      let client;
      before(async () => { client = await makeClient(lib, redis.port); });
      after(async () => { if (client) await closeClient(client); });
      const prefix = () => `erl:${lib}:${process.pid}:${++seq}:`;

      it('the N+1-th request gets 429 with draft-7 RateLimit headers and Retry-After', async () => {
        const store = new m.SlidingWindowStore({ client, prefix: prefix() });
        const app = await startApp({ windowMs: 60000, limit: 3, standardHeaders: 'draft-7', legacyHeaders: false, store });
        try {
          for (const left of [2, 1, 0]) {
            const r = await get(app.port, '/ok');
            assert.equal(r.status, 200);
            assert.equal(r.headers['ratelimit-policy'], '3;w=60');
            assert.match(r.headers.ratelimit, new RegExp(`^limit=3, remaining=${left}, reset=(59|60|61)$`));
            assert.equal(r.headers['retry-after'], undefined);
          }
          const r = await get(app.port, '/ok');
          assert.equal(r.status, 429);
          assert.match(r.headers.ratelimit, /^limit=3, remaining=0, reset=(59|60|61)$/);
          // Retry-After: when the oldest request leaves the window, as the module says
          const peek = await new m.RateLimiter(client, { limit: 3, windowMs: 60000, prefix: store.prefix }).peek('c1');
          assert.equal(peek.allowed, false);
          const retry = Number(r.headers['retry-after']);
          assert.ok(Math.abs(retry - Math.ceil(peek.retryAfterMs / 1000)) <= 1, `Retry-After ${retry}, retry ${peek.retryAfterMs} ms`);
          assert.ok(retry >= 59 && retry <= 61, `Retry-After ${retry}`);
          // another client is counted apart
          assert.equal((await get(app.port, '/ok', 'c2')).status, 200);
          // get() and resetKey()
          assert.deepEqual((await app.limiter.getKey('c1')).totalHits, 3);
          await app.limiter.resetKey('c1');
          assert.equal(await app.limiter.getKey('c1'), undefined);
          assert.equal((await get(app.port, '/ok')).status, 200);
        } finally {
          await app.close();
        }
      });

      it('Retry-After is right: the client is admitted again then, and not a second before', async () => {
        const store = new m.SlidingWindowStore({ client, prefix: prefix() });
        const app = await startApp({ windowMs: 1500, limit: 2, standardHeaders: 'draft-8', legacyHeaders: false, store });
        try {
          assert.equal((await get(app.port, '/ok')).status, 200);
          assert.equal((await get(app.port, '/ok')).status, 200);
          const refused = await get(app.port, '/ok');
          const at = Date.now();
          assert.equal(refused.status, 429);
          assert.match(refused.headers.ratelimit, /; r=0; t=[12]$/);
          assert.match(refused.headers['ratelimit-policy'], /; q=2; w=2; pk=:/);
          const retry = Number(refused.headers['retry-after']);
          assert.ok(retry === 1 || retry === 2, `Retry-After ${retry}`);
          // wait for the window to admit the client (asking the store, which counts nothing)
          await waitFor(async () => ((await app.limiter.getKey('c1')) || { totalHits: 0 }).totalHits < 2, { what: 'a free unit', intervalMs: 20 });
          const admittedAfter = Date.now() - at;
          assert.ok(admittedAfter <= retry * 1000 + 100, `admitted ${admittedAfter} ms after, Retry-After ${retry} s`);
          assert.ok(admittedAfter > (retry - 1) * 1000 - 150, `admitted ${admittedAfter} ms after, Retry-After ${retry} s`);
          assert.equal((await get(app.port, '/ok')).status, 200);
        } finally {
          await app.close();
        }
      });

      it('exact sliding window: no burst of 2x the limit across a window edge', async () => {
        const store = new m.SlidingWindowStore({ client, prefix: prefix() });
        const app = await startApp({ windowMs: 60000, limit: 5, standardHeaders: 'draft-6', legacyHeaders: false, store });
        try {
          let ok = 0;
          for (let i = 0; i < 12; i++) if ((await get(app.port, '/ok')).status === 200) ok += 1;
          assert.equal(ok, 5);
          const r = await get(app.port, '/ok');
          assert.equal(r.headers['ratelimit-limit'], '5');
          assert.equal(r.headers['ratelimit-remaining'], '0');
        } finally {
          await app.close();
        }
      });

      it('skipFailedRequests: failures are refunded, refusals were never counted', async () => {
        const store = new m.SlidingWindowStore({ client, prefix: prefix() });
        const app = await startApp({ windowMs: 60000, limit: 2, standardHeaders: 'draft-7', legacyHeaders: false, skipFailedRequests: true, store });
        const hits = async () => (await app.limiter.getKey('c1') || { totalHits: 0 }).totalHits;
        try {
          for (let i = 0; i < 4; i++) {
            assert.equal((await get(app.port, '/fail')).status, 500);
            await waitFor(async () => (await hits()) === 0, { what: 'the failure refunded' });
          }
          assert.equal((await get(app.port, '/ok')).status, 200);
          assert.equal((await get(app.port, '/ok')).status, 200);
          assert.equal((await get(app.port, '/ok')).status, 429);
          assert.equal((await get(app.port, '/ok')).status, 429);
          // the 429s count as failed requests: their decrement refunds nothing
          assert.equal(await hits(), 2);
          assert.equal((await get(app.port, '/ok')).status, 429);
        } finally {
          await app.close();
        }
      });

      it('FixedWindowStore: rate-limit-redis semantics on RL.FIXED (429 on the N+1-th, reset at the window end)', async () => {
        const store = new m.FixedWindowStore({ client, prefix: prefix() });
        const app = await startApp({ windowMs: 60000, limit: 3, standardHeaders: 'draft-7', legacyHeaders: false, store });
        try {
          const calls = await commandCalls(client, 'rl.fixed');
          const evals = await commandCalls(client, 'evalsha') + await commandCalls(client, 'eval');
          for (const left of [2, 1, 0]) {
            const r = await get(app.port, '/ok');
            assert.equal(r.status, 200);
            assert.match(r.headers.ratelimit, new RegExp(`^limit=3, remaining=${left}, reset=(59|60)$`));
          }
          const k = store.prefix + 'c1';
          const end = Number(await cmd(client, ['PEXPIRETIME', k], k));
          const r = await get(app.port, '/ok');
          assert.equal(r.status, 429);
          // a fixed window: the refused request counted too, and the window's end did not move
          assert.equal(String(await cmd(client, ['GET', k], k)), '4');
          assert.equal(Number(await cmd(client, ['PEXPIRETIME', k], k)), end);
          const retry = Number(r.headers['retry-after']);
          assert.ok(retry >= 59 && retry <= 60, `Retry-After ${retry}`);
          assert.equal(await commandCalls(client, 'rl.fixed'), calls + 4);
          assert.equal(await commandCalls(client, 'evalsha') + await commandCalls(client, 'eval'), evals);
          // get() counts nothing; resetKey() forgets
          const info = await app.limiter.getKey('c1');
          assert.equal(info.totalHits, 4);
          assert.ok(Math.abs(info.resetTime.getTime() - end) <= 5, `resetTime ${info.resetTime.getTime()} vs end ${end}`);
          assert.equal((await app.limiter.getKey('c1')).totalHits, 4);
          await app.limiter.resetKey('c1');
          assert.equal(await app.limiter.getKey('c1'), undefined);
          assert.equal((await get(app.port, '/ok')).status, 200);
        } finally {
          await app.close();
        }
      });

      it('FixedWindowStore: resetExpiryOnChange moves the end; a counter rate-limit-redis wrote goes on', async () => {
        const store = new m.FixedWindowStore({ client, prefix: prefix(), windowMs: 60000, resetExpiryOnChange: true });
        const k = store.prefix + 'u';
        await store.increment('u');
        await cmd(client, ['PEXPIRE', k, 1000], k); // as if the window were nearly over
        const d = await store.increment('u');
        assert.equal(d.totalHits, 2);
        assert.ok(Number(await cmd(client, ['PTTL', k], k)) > 1000);
        assert.ok(d.resetTime.getTime() - Date.now() > 59000);
        // RedisStore's format: an INCR'd string with a PEXPIRE
        const plain = new m.FixedWindowStore({ client, prefix: prefix() });
        const pk = plain.prefix + 'old';
        await cmd(client, ['SET', pk, '7', 'PX', '30000'], pk);
        const c = await plain.increment('old');
        assert.equal(c.totalHits, 8);
        assert.ok(c.resetTime.getTime() - Date.now() <= 30000);
      });

      it('FixedWindowStore: decrement uncounts, and leaves nothing once the window ended', async () => {
        const store = new m.FixedWindowStore({ client, prefix: prefix(), windowMs: 60000 });
        const k = store.prefix + 'd';
        await store.increment('d');
        await store.increment('d');
        await store.decrement('d');
        assert.equal((await store.get('d')).totalHits, 1);
        await store.resetKey('d'); // the window ended meanwhile
        await store.decrement('d');
        assert.equal(Number(await cmd(client, ['EXISTS', k], k)), 0);
        assert.equal(await store.get('d'), undefined);
        assert.throws(() => new m.FixedWindowStore({ client, windowMs: 0 }), RangeError);
        assert.throws(() => new m.FixedWindowStore({}), TypeError);
      });
    });
  }
});
