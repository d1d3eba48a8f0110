// SPDX-License-Identifier: BSD-3-Clause
// Prints, as JSON, the Lua scripts that the installed npm packages themselves send to Redis.
// bench.py loads these into the server: nothing here is a copy of the packages' scripts.
//   redis-gcra        lib/gcra.lua, read from the package's own file
//   rate-limit-redis  the script RedisStore passes to SCRIPT LOAD (captured with a stub client)
//   redlock           the lock and unlock scripts a Redlock instance sends with EVALSHA
'use strict';
const fs = require('fs');
const path = require('path');

function pkg(name) {
  const dir = path.join(__dirname, 'node_modules', name);
  return { version: JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version, dir };
}

async function main() {
  const out = {};

  const g = pkg('redis-gcra');
  const gcraFile = path.join(g.dir, 'lib', 'gcra.lua');
  out.redis_gcra = { package: 'redis-gcra', version: g.version, source: path.relative(__dirname, gcraFile),
                     script: fs.readFileSync(gcraFile, 'utf8') };

  const r = pkg('rate-limit-redis');
  const { RedisStore } = require('rate-limit-redis');
  const sent = [];
  const store = new RedisStore({ sendCommand: (...cmd) => { sent.push(cmd); return Promise.resolve('0'.repeat(40)); } });
  await store.loadIncrementScript('k');
  const load = sent.find(c => String(c[0]).toUpperCase() === 'SCRIPT' && String(c[1]).toUpperCase() === 'LOAD');
  if (!load) throw new Error('rate-limit-redis sent no SCRIPT LOAD');
  out.rate_limit_redis = { package: 'rate-limit-redis', version: r.version,
                           source: path.relative(__dirname, require.resolve('rate-limit-redis')) + ' (RedisStore.loadIncrementScript)',
                           script: load[2] };

  const l = pkg('redlock');
  const Redlock = require('redlock');
  const rl = new Redlock([{}], { retryCount: 0 });
  const src = path.relative(__dirname, require.resolve('redlock'));
  out.redlock_unlock = { package: 'redlock', version: l.version, source: src + ' (Redlock#unlockScript)', script: rl.unlockScript };
  out.redlock_lock = { package: 'redlock', version: l.version, source: src + ' (Redlock#lockScript)', script: rl.lockScript };

  process.stdout.write(JSON.stringify(out));
}

main().catch(e => { console.error(e && e.stack || e); process.exit(1); });
