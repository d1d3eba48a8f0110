// MultiLock: several exclusive locks of one hash slot taken all or none (LOCK.ACQUIRE_ALL),
// renewed together (LOCK.EXTEND_ALL) and released together (LOCK.RELEASE_ALL), with one fencing
// token valid on every key. The keys are checked in the client (distinct, one hash slot) so a
// CrossSlot error is raised before anything is sent.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const { Lock } = require('./lock');
const { assertSameSlot } = require('./slot');

const MAX_KEYS = 16;

class MultiLock extends Lock {
  /**
   * new MultiLock(client, keys, Lock's options): `keys` distinct, 1 to 16, sharing a hash slot
   * (a hash tag: ["{acct}:1", "{acct}:2"]). `name` is the first key (what inspect() shows).
   */
  constructor(client, keys, options = {}) {
    if (!Array.isArray(keys) || keys.length === 0) throw new TypeError('a MultiLock needs an array of at least one key');
    if (keys.length > MAX_KEYS) throw new RangeError(`a MultiLock takes at most ${MAX_KEYS} keys, got ${keys.length}`);
    if (new Set(keys.map(String)).size !== keys.length) throw new TypeError("a MultiLock's keys must be distinct");
    super(client, keys[0], options);
    this.keys = keys.slice();
  }

  _sent() { return this.keys.map((k) => this._ad.key(k)); }

  _route() {
    const ks = this._sent();
    assertSameSlot(ks, 'LOCK.ACQUIRE_ALL');
    return ks[0];
  }

  _acquireArgs(wait) {
    const ks = this._sent();
    const a = ['LOCK.ACQUIRE_ALL', ks.length, ...ks, this.owner, this.leaseMs];
    if (this.session) a.push('SESSION');
    if (this.lockDelayMs) a.push('LOCKDELAY', this.lockDelayMs);
    if (wait > 0) a.push('WAIT', wait);
    return a;
  }

  _releaseArgs() {
    const ks = this._sent();
    return ['LOCK.RELEASE_ALL', ks.length, ...ks, this.owner];
  }

  _extendArgs(ms) {
    const ks = this._sent();
    return ['LOCK.EXTEND_ALL', ks.length, ...ks, this.owner, ms];
  }

  _releaseMissed(reply) {
    const gone = this.keys.filter((k, i) => Number(reply[i]) < 0).map(String);
    return gone.length ? `not held any more at ${gone.join(', ')}` : null;
  }
}

module.exports = { MultiLock };
