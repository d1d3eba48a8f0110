// SPDX-License-Identifier: BSD-3-Clause
// One way to send the module's commands through either client library: ioredis (Redis and
// Cluster) or node-redis v4+ (createClient and createCluster). The library depends on neither:
// it recognises the client by its shape and calls its generic command entry point (ioredis
// `call` / `sendCommand(Command)`, node-redis `sendCommand`), with every argument a string.
//
// Cluster routing: ioredis does not know which argument of a module command is the key, so
// without help it sends such a command to a random node and follows the MOVED reply; the
// adapter gives the command its hash slot (computed from the key, lib/slot.js) so it goes to
// the right primary at once. node-redis takes the routing key as sendCommand's first argument.
//
// Blocking commands (the module's WAIT) hold their connection until answered, and every other
// command queued on that connection waits behind them; so they run on dedicated connections
// (duplicates of the client, without ioredis' commandTimeout/socketTimeout, which would cut a
// long wait), kept in a small idle pool that closes itself after idleMs.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const { keySlot } = require('./slot');
const { mapError } = require('./errors');

const adapters = new WeakMap();
const noop = () => {};

function toArg(a) {
  if (typeof a === 'string' || Buffer.isBuffer(a)) return a;
  if (typeof a === 'number' || typeof a === 'bigint') return String(a);
  if (a instanceof Uint8Array) return Buffer.from(a);
  throw new TypeError(`command arguments must be strings, numbers or Buffers, got ${typeof a}`);
}

class Adapter {
  /** The adapter of `client` (one per client object). */
  static of(client) {
    if (client instanceof Adapter) return client;
    let ad = adapters.get(client);
    if (!ad) {
      ad = new Adapter(client);
      adapters.set(client, ad);
    }
    return ad;
  }

  constructor(client) {
    if (client == null || typeof client !== 'object') {
      throw new TypeError('expected an ioredis or node-redis client (Redis, Cluster, createClient, createCluster)');
    }
    this.client = client;
    if (typeof client.call === 'function' && typeof client.sendCommand === 'function' && 'isCluster' in client) {
      this.lib = 'ioredis';
      this.cluster = client.isCluster === true;
      this.keyPrefix = (client.options && client.options.keyPrefix) || '';
    } else if (typeof client.sendCommand === 'function' && typeof client.duplicate === 'function') {
      this.lib = 'node-redis';
      this.cluster = typeof client.nodeClient === 'function';
      this.keyPrefix = '';
    } else {
      throw new TypeError('expected an ioredis or node-redis client (Redis, Cluster, createClient, createCluster)');
    }
    this.idle = [];          // dedicated connections not in use: {raw, timer}
    this.maxIdle = 4;
    this.idleMs = 5000;
    this._Command = null;    // ioredis' Command class (cluster routing)
    if (typeof client.once === 'function') {
      try { client.once('end', () => this.closeIdle()); } catch (_) { /* not an emitter */ }
    }
  }

  /** The key as the server sees it (ioredis' keyPrefix applied, as ioredis does for its own commands). */
  key(k) {
    if (!this.keyPrefix) return k;
    if (Buffer.isBuffer(k)) return Buffer.concat([Buffer.from(this.keyPrefix), k]);
    return this.keyPrefix + String(k);
  }

  _ioredisCommand(raw) {
    if (this._Command) return this._Command;
    let C = raw.constructor && raw.constructor.Command;
    if (!C && typeof raw.nodes === 'function') {
      const n = raw.nodes('all')[0];
      C = n && n.constructor && n.constructor.Command;
    }
    if (C) this._Command = C;
    return C || null;
  }

  /**
   * Send `argv` (command name first) on `raw` (default: the client; else a dedicated
   * connection of the same kind), routed in a cluster by `routeKey` (a key of the command, as
   * sent). Resolves to the reply (strings, numbers, arrays, null); rejects with a typed error
   * for an error reply.
   */
  async send(argv, routeKey, raw = this.client, cluster = this.cluster) {
    const args = argv.map(toArg);
    try {
      if (this.lib === 'ioredis') {
        if (cluster && routeKey != null) {
          const Command = this._ioredisCommand(raw);
          if (Command) {
            const cmd = new Command(args[0], args.slice(1), { replyEncoding: 'utf8' });
            cmd.slot = keySlot(routeKey);
            return await raw.sendCommand(cmd);
          }
        }
        return await raw.call(...args);
      }
      if (cluster) return await raw.sendCommand(routeKey == null ? undefined : routeKey, false, args);
      return await raw.sendCommand(args);
    } catch (e) {
      throw mapError(e);
    }
  }

  /**
   * Send a keyless command to every primary (stored policies are node-wide: in a cluster each
   * primary keeps its own table). Resolves to the replies, in node order; standalone: [reply].
   */
  async broadcast(argv) {
    if (!this.cluster) return [await this.send(argv)];
    const nodes = await this.primaries();
    return Promise.all(nodes.map((n) => this.send(argv, undefined, n, false)));
  }

  /** Send a keyless command to one primary (the first). */
  async sendAny(argv) {
    if (!this.cluster) return this.send(argv);
    const nodes = await this.primaries();
    return this.send(argv, undefined, nodes[0], false);
  }

  /** Clients of the cluster's primaries (standalone clients of each node). */
  async primaries() {
    const c = this.client;
    if (this.lib === 'ioredis') {
      if (c.status !== 'ready') {
        if (c.status === 'wait') c.connect().catch(noop);
        await new Promise((resolve, reject) => {
          const onReady = () => { c.removeListener('end', onEnd); resolve(); };
          const onEnd = () => { c.removeListener('ready', onReady); reject(new Error('the cluster client closed')); };
          c.once('ready', onReady);
          c.once('end', onEnd);
        });
      }
      return c.nodes('master');
    }
    return Promise.all(c.masters.map((m) => c.nodeClient(m)));
  }

  // ------------------------------------------------------------ dedicated connections
  /** A connection of its own for a blocking command (from the idle pool, or a new duplicate). */
  async dedicated() {
    const idle = this.idle.pop();
    if (idle) {
      clearTimeout(idle.timer);
      return idle.raw;
    }
    const c = this.client;
    let raw;
    if (this.lib === 'ioredis') {
      const off = { commandTimeout: undefined, socketTimeout: undefined, autoResendUnfulfilledCommands: false };
      raw = this.cluster
        ? c.duplicate([], { redisOptions: { ...(c.options.redisOptions || {}), ...off } })
        : c.duplicate(off);
      raw.on('error', noop);
    } else {
      raw = c.duplicate();
      raw.on('error', noop);
      await raw.connect();
    }
    return raw;
  }

  /** Give a dedicated connection back: pooled while few are idle, else closed. */
  giveBack(raw) {
    if (this.idle.length >= this.maxIdle) {
      this.destroy(raw);
      return;
    }
    const entry = { raw, timer: null };
    entry.timer = setTimeout(() => {
      const i = this.idle.indexOf(entry);
      if (i >= 0) this.idle.splice(i, 1);
      this.destroy(raw);
    }, this.idleMs);
    if (entry.timer.unref) entry.timer.unref();
    this.idle.push(entry);
  }

  /** Close a dedicated connection now (its pending command, if any, is rejected). */
  destroy(raw) {
    try {
      const r = raw.disconnect();
      if (r && typeof r.catch === 'function') r.catch(noop);
    } catch (_) { /* already closed */ }
  }

  /** Close the idle dedicated connections (those in use close when given back). */
  closeIdle() {
    const all = this.idle.splice(0);
    for (const e of all) {
      clearTimeout(e.timer);
      this.destroy(e.raw);
    }
  }
}

/**
 * Close the connections this library opened beside `client` for blocking waits (they also close
 * by themselves after a few idle seconds, and when an ioredis client ends).
 */
async function disconnect(client) {
  const ad = adapters.get(client);
  if (ad) ad.closeIdle();
}

module.exports = { Adapter, disconnect, toArg };
