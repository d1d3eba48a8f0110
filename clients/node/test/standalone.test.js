// The lock, limiter and captcha suites on a standalone server with the module, on both client
// libraries (ioredis and node-redis).
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const { describe, before, after } = require('node:test');
const { startStandalone } = require('./helpers/servers');
const { LIBS, makeClient, closeClient } = require('./helpers/clients');
const { lockTests, limiterTests, captchaTests } = require('./helpers/suites');

describe('standalone', () => {
  let server;
  before(async () => { server = await startStandalone(); });
  after(async () => { if (server) await server.stop(); });

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
