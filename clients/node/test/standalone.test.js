// The lock, limiter and captcha suites on a standalone server with the module, on both client
// libraries (ioredis and node-redis).
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const assert = require('node:assert/strict');
const { describe, it, before, after } = require('node:test');
const Redis = require('ioredis');
const m = require('../lib');
const { startStandalone } = require('./helpers/servers');
const { LIBS, makeClient, closeClient, cmd } = require('./helpers/clients');
const { lockTests, limiterTests, captchaTests } = require('./helpers/suites');

describe('standalone', () => {
  let server;
  before(async () => { server = await startStandalone(); });
  after(async () => { if (server) await server.stop(); });

  it("ioredis' keyPrefix applies to the module's keys, as to ioredis' own", async () => {
    const prefixed = new Redis({ host: '127.0.0.1', port: server.port, keyPrefix: 'app1:' });
    try {
      const l = new m.Lock(prefixed, 'prefixed-lock', { leaseMs: 5000 });
      await l.acquire();
      const rl = new m.RateLimiter(prefixed, { limit: 1, windowMs: 60000, prefix: 'rl:' });
      await rl.limit('u');
      assert.equal(await prefixed.exists('prefixed-lock'), 1);
      assert.equal(await prefixed.exists('rl:u'), 1);
      const plain = await makeClient('ioredis', server.port);
      assert.equal(Number(await cmd(plain, ['EXISTS', 'app1:prefixed-lock', 'app1:rl:u'])), 2);
      await closeClient(plain);
      await l.release();
    } finally {
      await closeClient(prefixed);
    }
  });

  for (const lib of LIBS) {
    describe(lib, () => {
      const env = { lib, cluster: false, client: null };
      before(async () => { env.client = await makeClient(lib, server.port); });
      after(async () => { if (env.client) await closeClient(env.client); });
      describe('locks', () => lockTests(env));
      describe('rate limits', () => limiterTests(env));
      describe('captcha', () => captchaTests(env));
    });
  }
});
