// Type-checks index.d.ts (tsc -p test/types, run by make test-node): a program using the API
// as the README shows it, against ioredis' and node-redis' own types, and the store in
// express-rate-limit's Store type.
// SPDX-License-Identifier: BSD-3-Clause
import Redis from 'ioredis';
import { createClient } from 'redis';
import { rateLimit, type Store } from 'express-rate-limit';
import {
  Lock, Semaphore, MultiLock, ReadWriteLock, RateLimiter, Captcha, SlidingWindowStore, FixedWindowStore, LockLost, RateLimited,
  setWindowPolicy, getPolicy, keySlot, type Decision,
} from '../../index';

async function main(): Promise<void> {
  const io = new Redis();
  const nr = createClient();
  const lock = new Lock(io, 'orders:42', { leaseMs: 2000, waitMs: 5000, onLost: (l, e: LockLost) => void [l.name, e.message] });
  const ac = new AbortController();
  if (await lock.acquire({ signal: ac.signal })) {
    const token: number | null = lock.token;
    await lock.extend(5000);
    await lock.release();
    void token;
  }
  const v: number = await new Lock(nr, 'x', { leaseMs: 100 }).run(async (l) => (l.held ? 1 : 0));
  {
    await using held = await lock.acquireOrThrow();
    void held.signal;
  }
  const sem = new Semaphore(io, 's', { permits: 3, leaseMs: 1000 });
  const size: number = await sem.addPermits(1);
  const ml = new MultiLock(io, ['{a}:1', '{a}:2'], { leaseMs: 1000 });
  await ml.acquire({ waitMs: 0 });
  new ReadWriteLock(io, 'rw', { leaseMs: 1000 }).readLock();
  const rl = new RateLimiter(nr, { algorithm: 'window', limit: 10, windowMs: 60000 });
  const d: Decision = await rl.limit('u', { cost: 2, waitMs: 500 });
  const g = new RateLimiter(io, { rate: 100, periodMs: 60000, burst: 20 });
  await g.limitOrThrow('u').catch((e: unknown) => (e instanceof RateLimited ? e.decision.retryAfterMs : 0));
  await setWindowPolicy(io, 'login', { limit: 5, windowMs: 60000 });
  const p = await getPolicy(io, 'login');
  if (p && p.algorithm === 'window') void p.windowMs;
  const c = new Captcha(io, 'site');
  await c.add([[50, 50], { visitorThreshold: 500, difficultyFactor: 500 }], 30);
  const difficulty: number = await c.visit();
  const { difficulty: df, durationS }: { difficulty: number; durationS: number } = await c.visitWithDuration();
  const visits: number = await c.count();
  const store: Store = new SlidingWindowStore({ client: io, prefix: 'rl:' });
  rateLimit({ windowMs: 60000, limit: 100, standardHeaders: 'draft-7', store });
  const fixed: Store = new FixedWindowStore({ client: nr, resetExpiryOnChange: true });
  rateLimit({ windowMs: 60000, limit: 100, store: fixed });
  void [v, size, d.allowed, d.remaining, d.retryAfterMs, d.resetAfterMs, difficulty, df, durationS, visits, keySlot('k')];
}
void main;
