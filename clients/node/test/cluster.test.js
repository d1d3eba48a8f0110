// The lock, limiter and captcha suites on a 3-primary Redis Cluster (made with redis-cli
// --cluster create), on both client libraries' Cluster clients; and the client's hash slots
// checked against the server's CLUSTER KEYSLOT.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const m = require('../lib');
const { startCluster } = require('./helpers/servers');
const { LIBS, makeClient, closeClient, cmd } = require('./helpers/clients');
const { lockTests, limiterTests, captchaTests, fresh } = require('./helpers/suites');

describe('cluster', () => {
  let cluster;
  before(async () => { cluster = await startCluster(3); });
  after(async () => { if (cluster) await cluster.stop(); });

  for (const lib of LIBS) {
    describe(lib, () => {
      const env = { lib, cluster: true, client: null };
      before(async () => { env.client = await makeClient(lib, { ports: cluster.ports }); });
      after(async () => { if (env.client) await closeClient(env.client); });

      it('hash slots computed in the client match CLUSTER KEYSLOT', async () => {
        const keys = ['', 'a', '123456789', '{user1000}.following', 'foo{}{bar}', 'foo{{bar}}zap', '{}x', 'é€', fresh(env, 'k')];
        for (let i = 0; i < 40; i++) keys.push(`k:${i}:{t${i % 7}}`, `plain-${i * 7919}`);
        for (const k of keys) {
          assert.equal(m.keySlot(k), Number(await cmd(env.client, ['CLUSTER', 'KEYSLOT', k], 'any')), `slot of ${JSON.stringify(k)}`);
        }
      });

      it('commands reach the primary of their key without a redirect', async () => {
        // each key lives only on its own primary: a lock on keys of many slots works
        const names = [];
        for (let i = 0; i < 12; i++) names.push(fresh(env, 'spread'));
        const slots = new Set(names.map((n) => Math.floor(m.keySlot(n) / 5462)));
        assert.ok(slots.size >= 2, 'the keys spread over the primaries');
        const locks = names.map((n) => new m.Lock(env.client, n, { leaseMs: 5000 }));
        for (const l of locks) assert.equal(await l.acquire({ waitMs: 0 }), true);
        for (const l of locks) await l.release();
      });

      it('captcha rename across slots rejects with CrossSlot before sending', async () => {
        const a = fresh(env, 'site');
        let b = fresh(env, 'site');
        while (m.keySlot(b) === m.keySlot(a)) b = fresh(env, 'site');
        const c = new m.Captcha(env.client, a);
        await c.add([[5, 10]], 30);
        await assert.rejects(c.rename(b), (e) => e instanceof m.CrossSlot && e.reply === undefined);
        // a captcha name takes no hash tag: find a plain name of the same slot
        let same = null;
        for (let i = 0; same === null; i++) if (m.keySlot(`${a}-${i}`) === m.keySlot(a)) same = `${a}-${i}`;
        const renamed = await c.rename(same);
        assert.equal(renamed.name, same);
        assert.equal(await renamed.exists(), true);
      });

      describe('locks', () => lockTests(env));
      it('express-rate-limit stores count on the primary of each key', async () => {
        const users = [];
        for (let i = 0; i < 12; i++) users.push(fresh(env, 'u'));
        const fixed = new m.FixedWindowStore({ client: env.client, prefix: fresh(env, 'rl') + ':', windowMs: 60000 });
        const sliding = new m.SlidingWindowStore({ client: env.client, prefix: fresh(env, 'rlw') + ':', windowMs: 60000, limit: 2 });
        assert.ok(new Set(users.map((u) => Math.floor(m.keySlot(fixed.prefix + u) / 5462))).size >= 2, 'keys on several primaries');
        for (const u of users) {
          assert.deepEqual([(await fixed.increment(u)).totalHits, (await fixed.increment(u)).totalHits], [1, 2]);
          assert.equal((await fixed.get(u)).totalHits, 2);
          assert.deepEqual([(await sliding.increment(u)).totalHits, (await sliding.increment(u)).totalHits,
            (await sliding.increment(u)).totalHits], [1, 2, 3]);
        }
      });

      describe('rate limits', () => limiterTests(env));
      describe('captcha', () => captchaTests(env));
    });
  }
});
