// SPDX-License-Identifier: BSD-3-Clause
// A fixed-window store for express-rate-limit (its Store interface: init, increment, decrement,
// resetKey, get, prefix, localKeys) on the module's fixed-window counter, RL.FIXED: the same
// semantics, options and keys as rate-limit-redis's RedisStore (prefix 'rl:', a plain string
// counter per client whose expiry is the window's end, resetExpiryOnChange), in one module
// command where RedisStore loads and runs a Lua script. An app that used RedisStore switches by
// changing its `store:` line, and the counters RedisStore wrote go on counting.
//
// How it answers express-rate-limit:
// - increment: RL.FIXED key windowMs [ELASTIC] -> {totalHits: count, resetTime: the window's
//   end}. Every request counts, refused ones too (the middleware compares totalHits with its
//   limit), as with RedisStore; for "a refused request takes nothing" and no burst at a window's
//   edge, use SlidingWindowStore;
// - decrement (skipSuccessfulRequests / skipFailedRequests): DECR, as RedisStore does; a DECR
//   that finds the window already ended (it would leave -1 without an expiry) deletes the key;
// - get: RL.FIXED ... COST 0 (count and time left in one read; counts nothing);
// - resetKey: DEL.
'use strict';

const { Adapter } = require('./adapter');
const { checkInt } = require('./wait');

const MAX_WINDOW_MS = 2 ** 42; // RL.FIXED's longest window

class FixedWindowStore {
  /**
   * new FixedWindowStore({ client, prefix = 'rl:', windowMs, resetExpiryOnChange = false }):
   * `client` an ioredis or node-redis client (Cluster ones too). `windowMs` defaults to the
   * middleware's (given to init()). resetExpiryOnChange: every request starts the window
   * again (RL.FIXED ... ELASTIC), as RedisStore's option of that name.
   */
  constructor(options = {}) {
    if (!options.client) throw new TypeError('FixedWindowStore needs { client } (ioredis or node-redis)');
    this.client = options.client;
    this._ad = Adapter.of(options.client);
    /** Prepended to every key (RedisStore's default, so its counters carry over). */
    this.prefix = options.prefix === undefined ? 'rl:' : String(options.prefix);
    /** Keys are shared by every instance using the same server: not local. */
    this.localKeys = false;
    /** Every request starts the window again (RL.FIXED ... ELASTIC). */
    this.resetExpiryOnChange = Boolean(options.resetExpiryOnChange);
    this._windowMs = options.windowMs === undefined ? null : checkInt('windowMs', options.windowMs, 1, MAX_WINDOW_MS);
    this.windowMs = this._windowMs === null ? 60000 : this._windowMs;
  }

  /** Called by express-rate-limit with the middleware's options. */
  init(options) {
    if (this._windowMs === null && typeof options.windowMs === 'number') {
      this.windowMs = checkInt('windowMs', options.windowMs, 1, MAX_WINDOW_MS);
    }
  }

  _key(key) { return this._ad.key(this.prefix + key); }

  async _fixed(k, cost) {
    const args = ['RL.FIXED', k, this.windowMs, 'COST', cost];
    if (this.resetExpiryOnChange && cost > 0) args.push('ELASTIC');
    const [count, resetAfterMs] = await this._ad.send(args, k);
    return { count: Number(count), resetAfterMs: Number(resetAfterMs) };
  }

  /** Count one request: resolves to {totalHits, resetTime} (resetTime: the window's end). */
  async increment(key) {
    const t = Date.now();
    const { count, resetAfterMs } = await this._fixed(this._key(key), 1);
    return { totalHits: count, resetTime: new Date(t + resetAfterMs) };
  }

  /** Uncount one request (DECR); nothing once its window has ended. */
  async decrement(key) {
    const k = this._key(key);
    const left = Number(await this._ad.send(['DECR', k], k));
    if (left < 0) await this._ad.send(['DEL', k], k); // the window had ended: DECR made a fresh -1
  }

  /** Forget the client's window (DEL). */
  async resetKey(key) {
    const k = this._key(key);
    await this._ad.send(['DEL', k], k);
  }

  /** The client's count and window end now, or undefined when it has no window. */
  async get(key) {
    const t = Date.now();
    const { count, resetAfterMs } = await this._fixed(this._key(key), 0);
    if (count === 0 && resetAfterMs === 0) return undefined;
    return { totalHits: count, resetTime: resetAfterMs >= 0 ? new Date(t + resetAfterMs) : undefined };
  }
}

module.exports = { FixedWindowStore };
