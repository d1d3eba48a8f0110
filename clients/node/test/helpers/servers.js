// SPDX-License-Identifier: BSD-3-Clause
// Real servers for the tests: a standalone redis-server with the module, and a 3-primary Redis
// Cluster made by `redis-cli --cluster create`, each node on free ports (the cluster bus port,
// port + 10000, free as well) in a temporary directory, all killed at the end. The module comes
// from MCAPTCHA_MODULE (default <repo>/build/mcaptcha_cache.so), the server from REDIS_SERVER
// (default redis-server), redis-cli from REDIS_CLI (default redis-cli).
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFile } = require('node:child_process');

const REPO = path.resolve(__dirname, '..', '..', '..', '..');
const MODULE = process.env.MCAPTCHA_MODULE || path.join(REPO, 'build', 'mcaptcha_cache.so');
const REDIS_SERVER = process.env.REDIS_SERVER || 'redis-server';
const REDIS_CLI = process.env.REDIS_CLI || 'redis-cli';

const running = new Set();
function killAll() {
  for (const p of running) {
    try { p.kill('SIGKILL'); } catch (_) { /* gone */ }
  }
}
// the servers die with the test process, also when it is interrupted
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, () => {
    killAll();
    process.kill(process.pid, sig);
  });
}

function portFree(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

const handedOut = new Set();

/** A TCP port on 127.0.0.1 free now (with port + each offset free too), not handed out before. */
async function freePort(offsets = []) {
  for (let i = 0; i < 200; i++) {
    const port = await new Promise((resolve, reject) => {
      const s = net.createServer();
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => {
        const p = s.address().port;
        s.close(() => resolve(p));
      });
    });
    if (handedOut.has(port) || offsets.some((o) => port + o > 65535)) continue;
    let ok = true;
    for (const o of offsets) if (!(await portFree(port + o))) ok = false;
    if (!ok) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error('no free TCP port');
}

/** One RESP command over a fresh socket (the tests' own probe, independent of the clients). */
function rawCommand(port, args, timeoutMs = 2000) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let buf = '';
    const done = (err, v) => {
      clearTimeout(t);
      sock.destroy();
      if (err) reject(err); else resolve(v);
    };
    const t = setTimeout(() => done(new Error('timeout')), timeoutMs);
    sock.on('error', (e) => done(e));
    sock.on('connect', () => {
      sock.write(`*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join(''));
    });
    sock.on('data', (d) => {
      buf += d.toString('utf8');
      const first = buf[0];
      if (first === '+' || first === '-' || first === ':') {
        if (buf.includes('\r\n')) done(null, buf.slice(0, buf.indexOf('\r\n')));
      } else if (first === '$') {
        const nl = buf.indexOf('\r\n');
        if (nl < 0) return;
        const n = Number(buf.slice(1, nl));
        if (n < 0) done(null, null);
        else if (Buffer.byteLength(buf) >= nl + 2 + n + 2) done(null, buf.slice(nl + 2, nl + 2 + n));
      }
    });
  });
}

/** Poll `fn` (sync or async) until it returns a truthy value; rejects after timeoutMs. */
async function waitFor(fn, { timeoutMs = 15000, intervalMs = 10, what = 'condition' } = {}) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

class RedisServer {
  constructor(port, dir, extra = []) {
    this.port = port;
    this.dir = dir;
    this.extra = extra;
    this.proc = null;
  }

  start() {
    if (!fs.existsSync(MODULE)) throw new Error(`module not found: ${MODULE} (run make, or set MCAPTCHA_MODULE)`);
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir,
      '--save', '', '--appendonly', 'no', '--logfile', path.join(this.dir, 'redis.log'),
      '--loadmodule', MODULE, ...this.extra];
    this.proc = spawn(REDIS_SERVER, args, { stdio: 'ignore' });
    running.add(this.proc);
    this.proc.on('exit', () => running.delete(this.proc));
    return this;
  }

  async ready() {
    await waitFor(async () => (await rawCommand(this.port, ['PING'])) === '+PONG', { what: `redis-server on port ${this.port}` });
    return this;
  }

  logTail(n = 30) {
    try {
      return fs.readFileSync(path.join(this.dir, 'redis.log'), 'utf8').split('\n').slice(-n).join('\n');
    } catch (_) { return ''; }
  }

  async stop() {
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    const gone = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await gone;
  }
}

function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** A standalone server with the module: {port, stop()}. */
async function startStandalone() {
  const dir = tempDir('mcache-node-');
  const s = new RedisServer(await freePort(), dir).start();
  try {
    await s.ready();
  } catch (e) {
    await s.stop();
    throw new Error(`${e.message}\n${s.logTail()}`);
  }
  return {
    port: s.port,
    server: s,
    async stop() {
      await s.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function cli(args) {
  return new Promise((resolve, reject) => {
    execFile(REDIS_CLI, args, { timeout: 60000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${REDIS_CLI} ${args.join(' ')}: ${err.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

/** A 3-primary cluster (no replicas) with the module on every node: {ports, stop()}. */
async function startCluster(n = 3) {
  const base = tempDir('mcache-node-cluster-');
  const nodes = [];
  try {
    for (let i = 0; i < n; i++) {
      const dir = path.join(base, `node-${i}`);
      fs.mkdirSync(dir);
      const port = await freePort([10000]);
      nodes.push(new RedisServer(port, dir, ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
        '--cluster-node-timeout', '2000']).start());
    }
    for (const s of nodes) await s.ready();
    const out = await cli(['--cluster', 'create', ...nodes.map((s) => `127.0.0.1:${s.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    if (!out.includes('All 16384 slots covered')) throw new Error(`cluster create failed:\n${out}`);
    // every node sees the cluster ok, with every node known and every slot assigned
    for (const s of nodes) {
      await waitFor(async () => {
        const info = await cli(['-p', String(s.port), 'CLUSTER', 'INFO']);
        return info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${n}`) &&
          info.includes('cluster_slots_assigned:16384');
      }, { what: `cluster state ok on ${s.port}`, intervalMs: 50, timeoutMs: 30000 });
    }
  } catch (e) {
    const tails = nodes.map((s) => s.logTail(10)).join('\n');
    await Promise.all(nodes.map((s) => s.stop()));
    fs.rmSync(base, { recursive: true, force: true });
    throw new Error(`${e.message}\n${tails}`);
  }
  return {
    ports: nodes.map((s) => s.port),
    nodes,
    async stop() {
      await Promise.all(nodes.map((s) => s.stop()));
      fs.rmSync(base, { recursive: true, force: true });
    },
  };
}

module.exports = { MODULE, REPO, freePort, rawCommand, waitFor, startStandalone, startCluster };
