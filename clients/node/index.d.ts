// Types of mcaptcha-cache (hand-written; the package is plain JavaScript, lib/). The client is
// any ioredis (Redis, Cluster) or node-redis v4+ (createClient, createCluster) client: typed
// structurally here, so the package needs neither library's types.
// SPDX-License-Identifier: BSD-3-Clause

/** An ioredis or node-redis client, standalone or Cluster (recognised by its shape). */
export type RedisClient = object;
/** A key or a name: a string, or bytes. */
export type Key = string | Buffer;

// ------------------------------------------------------------------ errors
export class McaptchaCacheError extends Error {
  /** The server's error message (with its code, e.g. "ERR ..."), when made from a reply. */
  reply?: string;
  cause?: unknown;
}
export class ServerError extends McaptchaCacheError {}
export class InvalidArgument extends ServerError {}
export class WrongType extends ServerError {}
export class CrossSlot extends ServerError {
  /** The keys' hash slots, when raised by the client (before sending). */
  slots?: number[];
}
export class LockError extends McaptchaCacheError {}
export class LockNotOwned extends LockError {}
export class LockLost extends LockNotOwned {}
export class LockNotAcquired extends LockError {}
export class PermitsMismatch extends LockError {}
export class RateLimited extends McaptchaCacheError {
  constructor(decision: Decision, key: string);
  decision: Decision;
  key: string;
  retryAfterMs: number;
}
export class CaptchaError extends McaptchaCacheError {}
export class CaptchaNotFound extends CaptchaError {}
export class CaptchaExists extends CaptchaError {}
export class ChallengeNotFound extends CaptchaError {}
export class ChallengeExists extends CaptchaError {}
export class InvalidCaptchaConfig extends CaptchaError {}
/** The typed error for a server error reply of either library; other errors unchanged. */
export function mapError(err: unknown): unknown;

// ------------------------------------------------------------------- locks
export interface LockOptions {
  /** The lease (ms): renewed while held; a crashed holder loses it at most leaseMs after its last renewal. */
  leaseMs: number;
  /** How long acquire() waits on the server: 0 tries once; undefined, null or Infinity: without end. */
  waitMs?: number | null;
  /** LOCK.ACQUIRE ... SESSION: the server also releases the lock when its connection closes. */
  session?: boolean;
  /** Renew the lease while held (default true). */
  autoRenew?: boolean;
  /** Renewal period (default leaseMs / 3). */
  renewEveryMs?: number;
  /** Called when the lock is found lost while held. */
  onLost?: (lock: Lock, error: LockLost) => void | Promise<void>;
  /** The owner string (default: a random one per instance). */
  owner?: string;
  /** LOCKDELAY: the permit stays taken this long after a hold ends without a release. */
  lockDelayMs?: number;
}

export interface AcquireOptions {
  /** Overrides the instance's waitMs. */
  waitMs?: number | null;
  /** Stops the wait: the promise rejects with the signal's reason, the server forgets the waiter. */
  signal?: AbortSignal;
}

export interface LockHolder {
  owner: string;
  /** Lease left (ms). */
  leaseMs: number;
  /** The fencing token of its grant. */
  token: number;
  /** Acquisitions; 0 is a lock-delay (held by nobody). */
  count: number;
  lockDelay: boolean;
}

export interface LockInfo {
  permits: number;
  lastToken: number;
  waiters: number;
  holders: LockHolder[];
  adjustment: number;
  size: number | null;
}

export class Lock {
  constructor(client: RedisClient, name: Key, options: LockOptions);
  readonly client: RedisClient;
  readonly name: Key;
  readonly owner: string;
  readonly leaseMs: number;
  readonly waitMs: number | null;
  readonly session: boolean;
  readonly autoRenew: boolean;
  readonly renewEveryMs: number | null;
  onLost: LockOptions['onLost'] | null;
  readonly lockDelayMs: number | null;
  /** The fencing token of the last grant (grows with every grant, also across restarts). */
  token: number | null;
  readonly held: boolean;
  readonly lost: boolean;
  readonly lostReason: string | null;
  /** Aborted when the current hold ends (released; lost: reason LockLost). Null before a grant. */
  readonly signal: AbortSignal | null;
  readonly permits: number;
  /** true when granted, false when the wait ran out. */
  acquire(options?: AcquireOptions): Promise<boolean>;
  /** Resolves to this lock; rejects with LockNotAcquired when the wait runs out. */
  acquireOrThrow(options?: AcquireOptions): Promise<this>;
  /** Acquire, run fn, release in any case; resolves to fn's result. */
  run<T>(fn: (lock: this) => T | Promise<T>, options?: AcquireOptions): Promise<T>;
  /** Rejects with LockLost (lost while held) or LockNotOwned (not held). */
  release(): Promise<void>;
  /** Release if held; LockLost if the lock was lost and that was not reported yet. */
  dispose(): Promise<void>;
  /** Renew once to ms from now (default leaseMs); resolves to the new lease. */
  extend(ms?: number): Promise<number>;
  inspect(): Promise<LockInfo | null>;
  owned(): Promise<boolean>;
  locked(): Promise<boolean>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface SemaphoreOptions extends LockOptions {
  /** Holders at once (1..1024); every holder passes the same. */
  permits: number;
  /** Permits this holder takes at once (default 1). */
  take?: number;
}

export class Semaphore extends Lock {
  constructor(client: RedisClient, name: Key, options: SemaphoreOptions);
  addPermits(delta: number): Promise<number>;
  drainPermits(): Promise<number>;
  availablePermits(): Promise<number>;
}

export class ReadWriteLock {
  constructor(client: RedisClient, name: Key, options: LockOptions);
  readLock(): Lock;
  writeLock(): Lock;
}

export class MultiLock extends Lock {
  /** Distinct keys (1..16) of one hash slot; else acquire() rejects with CrossSlot before sending. */
  constructor(client: RedisClient, keys: Key[], options: LockOptions);
  readonly keys: Key[];
}

// ------------------------------------------------------------- rate limits
/** The module's [allowed, remaining, retry_after_ms, reset_after_ms]. */
export interface Decision {
  allowed: boolean;
  /** Units still available right after this request. */
  remaining: number;
  /** ms until the same request could fit; -1 when allowed, and when it never can (cost above the capacity). */
  retryAfterMs: number;
  /** ms until the limiter is full again (its key expires then). */
  resetAfterMs: number;
}

export type RateLimiterOptions = { prefix?: string } & (
  | { algorithm?: 'gcra'; rate: number; periodMs: number; burst?: number; policy?: undefined }
  | { algorithm?: 'window'; limit: number; windowMs: number; policy?: undefined }
  | { algorithm?: 'gcra' | 'window'; policy: string }
);

export interface LimitOptions {
  /** Units this request takes (default 1). */
  cost?: number;
  /** 0 (default) answers at once; N waits on the server up to N ms; null or Infinity until the units fit. */
  waitMs?: number | null;
  signal?: AbortSignal;
}

export class RateLimiter {
  constructor(client: RedisClient, options: RateLimiterOptions);
  readonly algorithm: 'gcra' | 'window';
  readonly prefix: string;
  readonly policy: string | null;
  limit(key: Key, options?: LimitOptions): Promise<Decision>;
  /** Rejects with RateLimited when refused. */
  limitOrThrow(key: Key, options?: LimitOptions): Promise<Decision>;
  peek(key: Key, options?: { cost?: number }): Promise<Decision>;
  refund(key: Key, units: number): Promise<number>;
  reset(key: Key): Promise<boolean>;
}

export type Policy =
  | { algorithm: 'gcra'; rate: number; periodMs: number; burst: number | null }
  | { algorithm: 'window'; limit: number; windowMs: number };

export function setGcraPolicy(client: RedisClient, name: string, policy: { rate: number; periodMs: number; burst?: number }): Promise<void>;
export function setWindowPolicy(client: RedisClient, name: string, policy: { limit: number; windowMs: number }): Promise<void>;
export function getPolicy(client: RedisClient, name: string): Promise<Policy | null>;
export function deletePolicy(client: RedisClient, name: string): Promise<boolean>;
export function listPolicies(client: RedisClient): Promise<string[]>;

// ----------------------------------------------------------------- captcha
export type CaptchaLevel = [visitorThreshold: number, difficultyFactor: number] | { visitorThreshold: number; difficultyFactor: number };

export class Captcha {
  constructor(client: RedisClient, name: Key);
  readonly name: Key;
  add(levels: CaptchaLevel[], durationS?: number): Promise<void>;
  /** ADD_VISITOR: counts one visit; the difficulty factor. */
  visit(): Promise<number>;
  /** ADD_VISITOR: counts one visit, as visit(); the difficulty factor and the seconds it counts. */
  visitWithDuration(): Promise<{ difficulty: number; durationS: number }>;
  /**
   * @deprecated It counts a visit (its name reads like a query): the old name of
   * visitWithDuration(). To read without counting, call count().
   */
  visitInfo(): Promise<{ difficulty: number; durationS: number }>;
  /** GET: the visits still counting; a query, counts nothing. */
  count(): Promise<number>;
  exists(): Promise<boolean>;
  delete(): Promise<void>;
  rename(newName: Key): Promise<Captcha>;
  addChallenge(challenge: string, difficulty: number, durationS: number): Promise<void>;
  getChallenge(challenge: string): Promise<{ difficulty: number; durationS: number }>;
  deleteChallenge(challenge: string): Promise<void>;
}

// ------------------------------------------------------ express-rate-limit
export interface ClientRateLimitInfo {
  totalHits: number;
  resetTime: Date | undefined;
}

export interface SlidingWindowStoreOptions {
  client: RedisClient;
  /** Prepended to every key (default 'rlw:'). */
  prefix?: string;
  /** Default: the middleware's limit (a number). */
  limit?: number;
  /** Default: the middleware's windowMs. */
  windowMs?: number;
}

/** A Store for express-rate-limit on the module's exact sliding window. */
export class SlidingWindowStore {
  constructor(options: SlidingWindowStoreOptions);
  prefix: string;
  localKeys: boolean;
  limit: number | null;
  windowMs: number;
  init(options: { windowMs?: number; limit?: unknown; max?: unknown; skipFailedRequests?: boolean }): void;
  increment(key: string): Promise<ClientRateLimitInfo>;
  decrement(key: string): Promise<void>;
  resetKey(key: string): Promise<void>;
  get(key: string): Promise<ClientRateLimitInfo | undefined>;
}

export interface FixedWindowStoreOptions {
  client: RedisClient;
  /** Prepended to every key (default 'rl:', rate-limit-redis's). */
  prefix?: string;
  /** Default: the middleware's windowMs (1 to 2^42). */
  windowMs?: number;
  /** Every request starts the window again (RL.FIXED ... ELASTIC); default false. */
  resetExpiryOnChange?: boolean;
}

/**
 * A Store for express-rate-limit on the module's fixed-window counter (RL.FIXED): the
 * semantics, options and keys of rate-limit-redis's RedisStore, without a Lua script.
 * Every request counts, refused ones too; resetTime is the window's end.
 */
export class FixedWindowStore {
  constructor(options: FixedWindowStoreOptions);
  prefix: string;
  localKeys: boolean;
  resetExpiryOnChange: boolean;
  windowMs: number;
  init(options: { windowMs?: number }): void;
  increment(key: string): Promise<ClientRateLimitInfo>;
  decrement(key: string): Promise<void>;
  resetKey(key: string): Promise<void>;
  get(key: string): Promise<ClientRateLimitInfo | undefined>;
}

// ------------------------------------------------------------------- misc
/** The Redis Cluster hash slot of a key (CRC16, hash tags). */
export function keySlot(key: Key): number;
/** Close the idle connections opened beside `client` for blocking waits. */
export function disconnect(client: RedisClient): Promise<void>;
