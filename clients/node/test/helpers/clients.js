// The clients the tests run on: ioredis and node-redis, standalone and Cluster, made and closed
// the same way whatever the library, plus the tests' own look at the servers (INFO
// commandstats summed over the primaries) through the library's adapter.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const Redis = require('ioredis');
const { createClient, createCluster } = require('redis');
const { disconnect } = require('../../lib');
const { Adapter } = require('../../lib/adapter');

const LIBS = ['ioredis', 'node-redis'];

/** A connected client of `lib` to a standalone server (port) or a cluster ({ports}). */
async function makeClient(lib, target) {
  const cluster = typeof target === 'object';
  let client;
  if (lib === 'ioredis') {
    if (cluster) {
      client = new Redis.Cluster(target.ports.map((port) => ({ host: '127.0.0.1', port })));
    } else {
      client = new Redis({ host: '127.0.0.1', port: target, lazyConnect: true });
    }
    client.on('error', () => {});
    if (cluster) await new Promise((resolve, reject) => { client.once('ready', resolve); client.once('end', reject); });
    else await client.connect();
  } else {
    client = cluster
      ? createCluster({ rootNodes: target.ports.map((port) => ({ socket: { host: '127.0.0.1', port } })) })
      : createClient({ socket: { host: '127.0.0.1', port: target } });
    client.on('error', () => {});
    await client.connect();
  }
  return client;
}

async function closeClient(client) {
  await disconnect(client);
  try {
    await client.quit();
  } catch (_) {
    /* already closed */
  }
}

/** Calls of a command (lower-case name, e.g. 'rl.window') so far, summed over the primaries. */
async function commandCalls(client, name) {
  const ad = Adapter.of(client);
  const nodes = ad.cluster ? await ad.primaries() : [client];
  let total = 0;
  for (const n of nodes) {
    const info = String(await ad.send(['INFO', 'commandstats'], undefined, n, false));
    const m = info.match(new RegExp(`cmdstat_${name.replace('.', '\\.')}:calls=(\\d+)`, 'i'));
    if (m) total += Number(m[1]);
  }
  return total;
}

/** Any command through the library's adapter (routed by `key` in a cluster). */
function cmd(client, args, key) {
  return Adapter.of(client).send(args, key);
}

module.exports = { LIBS, makeClient, closeClient, commandCalls, cmd };
