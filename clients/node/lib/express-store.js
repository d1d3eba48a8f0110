// SPDX-License-Identifier: BSD-3-Clause
// A store for express-rate-limit (its Store interface: init, increment, decrement, resetKey,
// get, prefix, localKeys) backed by the module's exact sliding window (RL.WINDOW, RL.REFUND,
// RL.WINDOW_PEEK), so an Express app switches from another store by changing its `store:` line.
//
// How the window's answer becomes express-rate-limit's {totalHits, resetTime}:
// - allowed: totalHits = limit - remaining; resetTime = when the window is empty again;
// - refused: nothing is counted (the module refuses without taking); totalHits = limit + 1, so
//   the middleware answers 429; resetTime = when one more request fits (retry_after_ms), which
//   is what the middleware puts in Retry-After (and the RateLimit headers' reset).
// Unlike a fixed window, the limit holds within ANY windowMs (no 2x burst at a window's edge),
// and a refused client gets in again as soon as its oldest request leaves the window.
// When the middleware's limit is a function (per request) and the store is given no `limit`,
// the store counts every request instead (RL.WINDOW with the largest limit), refused ones too.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const { Adapter } = require('./adapter');
const { ServerError } = require('./errors');
const { toDecision } = require('./ratelimit');
const { checkInt } = require('./wait');

const COUNTING_LIMIT = 4294967295; // the largest RL.WINDOW limit

class SlidingWindowStore {
  /**
   * new SlidingWindowStore({ client, prefix = 'rlw:', limit, windowMs }): `client` an ioredis
   * or node-redis client (Cluster ones too). `limit` / `windowMs` default to the middleware's
   * (`limit` and `windowMs` options, given to init()).
   */
  constructor(options = {}) {
    if (!options.client) throw new TypeError('SlidingWindowStore needs { client } (ioredis or node-redis)');
    this.client = options.client;
    this._ad = Adapter.of(options.client);
    /** Prepended to every key (and used by express-rate-limit's double-count check). */
    this.prefix = options.prefix === undefined ? 'rlw:' : String(options.prefix);
    /** Keys are shared by every instance using the same server: not local. */
    this.localKeys = false;
    this._limit = options.limit === undefined ? null : checkInt('limit', options.limit, 1, COUNTING_LIMIT);
    this._windowMs = options.windowMs === undefined ? null : checkInt('windowMs', options.windowMs, 1);
    this.limit = this._limit;
    this.windowMs = this._windowMs === null ? 60000 : this._windowMs;
    this._trackRefusals = false;
    this._refused = new Map(); // key -> [expiry ms]: refusals not counted, whose decrement must not refund
  }

  /** Called by express-rate-limit with the middleware's options. */
  init(options) {
    if (this._windowMs === null && typeof options.windowMs === 'number') this.windowMs = options.windowMs;
    if (this._limit === null) {
      const l = typeof options.limit === 'number' ? options.limit : (typeof options.max === 'number' ? options.max : null);
      this.limit = l !== null && l >= 1 ? l : null;
    }
    this._trackRefusals = Boolean(options.skipFailedRequests);
  }

  _key(key) { return this._ad.key(this.prefix + key); }

  async _window(cmd, k, limit, extra) {
    const args = [cmd, k, limit, this.windowMs, ...extra];
    try {
      return toDecision(await this._ad.send(args, k));
    } catch (e) {
      // the key holds a window of another length (windowMs changed): start it anew
      if (cmd === 'RL.WINDOW' && e instanceof ServerError && /window of another length/.test(e.message)) {
        await this._ad.send(['DEL', k], k);
        return toDecision(await this._ad.send(args, k));
      }
      throw e;
    }
  }

  /** Count one request: resolves to {totalHits, resetTime}. */
  async increment(key) {
    const k = this._key(key);
    const t = Date.now();
    if (this.limit === null) {
      const d = await this._window('RL.WINDOW', k, COUNTING_LIMIT, []);
      return { totalHits: COUNTING_LIMIT - d.remaining, resetTime: new Date(t + d.resetAfterMs) };
    }
    const d = await this._window('RL.WINDOW', k, this.limit, []);
    if (d.allowed) return { totalHits: this.limit - d.remaining, resetTime: new Date(t + d.resetAfterMs) };
    if (this._trackRefusals) this._noteRefusal(k, t);
    const retry = d.retryAfterMs >= 0 ? d.retryAfterMs : d.resetAfterMs;
    return { totalHits: this.limit + 1, resetTime: new Date(t + retry) };
  }

  _noteRefusal(k, t) {
    if (this._refused.size > 10000) {
      for (const [key, list] of this._refused) {
        const live = list.filter((e) => e > t);
        if (live.length) this._refused.set(key, live);
        else this._refused.delete(key);
      }
    }
    const list = this._refused.get(k) || [];
    list.push(t + this.windowMs);
    this._refused.set(k, list);
  }

  /**
   * Uncount one request (skipSuccessfulRequests / skipFailedRequests): RL.REFUND 1, except
   * for a refused request, which was never counted.
   */
  async decrement(key) {
    const k = this._key(key);
    const list = this._refused.get(k);
    if (list && list.length) {
      list.shift();
      if (!list.length) this._refused.delete(k);
      return;
    }
    await this._ad.send(['RL.REFUND', k, 1], k);
  }

  /** Forget the client's requests (DEL). */
  async resetKey(key) {
    const k = this._key(key);
    this._refused.delete(k);
    await this._ad.send(['DEL', k], k);
  }

  /** The client's count now (RL.WINDOW_PEEK ... COST 0), or undefined when it has none. */
  async get(key) {
    const k = this._key(key);
    const limit = this.limit === null ? COUNTING_LIMIT : this.limit;
    const t = Date.now();
    const d = await this._window('RL.WINDOW_PEEK', k, limit, ['COST', 0]);
    const hits = limit - d.remaining;
    if (hits <= 0 && d.resetAfterMs <= 0) return undefined;
    return { totalHits: hits, resetTime: new Date(t + d.resetAfterMs) };
  }
}

module.exports = { SlidingWindowStore };
