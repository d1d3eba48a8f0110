// Tests without a server: hash slots (CRC16 vectors of the Cluster specification), the mapping
// of error replies to typed errors, argument checks, and which clients the adapter accepts.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const assert = require('node:assert/strict');
const { describe, it } = require('node:test');
const m = require('../lib');
const { crc16 } = require('../lib/slot');
const { mapError } = require('../lib/errors');
const { WaitBudget } = require('../lib/wait');

class ReplyError extends Error {}        // the shape of ioredis' error replies
class ErrorReply extends Error {}        // ... and node-redis'

describe('hash slots', () => {
  it('CRC16-XMODEM and the hash-tag rule', () => {
    assert.equal(crc16(Buffer.from('123456789')), 0x31c3);
    assert.equal(m.keySlot('123456789'), 0x31c3 % 16384);
    assert.equal(m.keySlot('{user1000}.following'), m.keySlot('user1000'));
    assert.equal(m.keySlot('foo{}{bar}'), crc16(Buffer.from('foo{}{bar}')) % 16384);
    assert.equal(m.keySlot('foo{{bar}}zap'), m.keySlot('{bar'));
    assert.equal(m.keySlot(Buffer.from('{a}b')), m.keySlot('a'));
  });
});

describe('errors', () => {
  const cases = [
    ['WRONGTYPE Operation against a key holding the wrong kind of value', m.WrongType],
    ["CROSSSLOT Keys in request don't hash to the same slot", m.CrossSlot],
    ['ERR the lock is not held by this owner', m.LockNotOwned],
    ["ERR PERMITS differs from the semaphore's size (2) while it is held", m.PermitsMismatch],
    ['Captcha not found', m.CaptchaNotFound],
    ['Challenge not found', m.ChallengeNotFound],
    ['Challenge already exists', m.ChallengeExists],
    ['ERR captcha already exists', m.CaptchaExists],
    ['ERR invalid config: levels must not be empty', m.InvalidCaptchaConfig],
    ["ERR no such policy 'x' (RL.POLICY_SET defines it)", m.InvalidArgument],
    ['ERR lease-ms must be an integer from 1 to 1099511627776', m.InvalidArgument],
    ['ERR something else', m.ServerError],
  ];
  for (const Cls of [ReplyError, ErrorReply]) {
    it(`maps ${Cls.name}s by their message`, () => {
      for (const [msg, want] of cases) {
        const e = mapError(new Cls(msg));
        assert.ok(e instanceof want, `${msg} -> ${e.name}`);
        assert.ok(e instanceof m.McaptchaCacheError);
        assert.equal(e.reply, msg);
        assert.equal(e.name, want.name);
      }
    });
  }
  it('leaves other errors alone', () => {
    const e = new Error('Connection is closed.');
    assert.equal(mapError(e), e);
    assert.ok(new m.LockLost('x') instanceof m.LockNotOwned);
  });
});

describe('arguments', () => {
  const fake = { call() {}, sendCommand() {}, isCluster: false, duplicate() {} };
  it('checks times and counts before sending', () => {
    assert.throws(() => new m.Lock(fake, 'k', {}), TypeError);
    assert.throws(() => new m.Lock(fake, 'k', { leaseMs: 0 }), RangeError);
    assert.throws(() => new m.Lock(fake, 'k', { leaseMs: 100, renewEveryMs: 100 }), RangeError);
    assert.throws(() => new m.Semaphore(fake, 'k', { leaseMs: 100, permits: 2, take: 3 }), RangeError);
    assert.throws(() => new m.MultiLock(fake, ['a', 'a'], { leaseMs: 100 }), TypeError);
    assert.throws(() => new m.RateLimiter(fake, { rate: 1 }), TypeError);
    assert.throws(() => new m.RateLimiter(fake, { algorithm: 'fixed', limit: 1, windowMs: 1 }), TypeError);
  });
  it('accepts ioredis- and node-redis-shaped clients only', () => {
    assert.throws(() => new m.Lock({}, 'k', { leaseMs: 100 }), TypeError);
    assert.doesNotThrow(() => new m.Lock({ sendCommand() {}, duplicate() {} }, 'k', { leaseMs: 100 }));
  });
  it('a wait budget ends its last round at the deadline', () => {
    assert.equal(new WaitBudget(0).nextRoundMs(), 0);
    assert.equal(new WaitBudget(0).expired(), true);
    const b = new WaitBudget(5000);
    assert.ok(b.nextRoundMs() > 4900 && b.nextRoundMs() <= 5000);
    assert.equal(b.expired(), false);
    assert.equal(new WaitBudget(null).nextRoundMs(), 3600000);
  });
});
