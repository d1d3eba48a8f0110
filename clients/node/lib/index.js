// mcaptcha-cache for Node.js: locks, semaphores, rate limits and captchas of the mcaptcha-cache
// Redis module over an ioredis or node-redis client (standalone or Cluster), and a store for
// express-rate-limit (SlidingWindowStore, FixedWindowStore). This file only gathers the exports.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const errors = require('./errors');
const { Lock, Semaphore, ReadWriteLock } = require('./lock');
const { MultiLock } = require('./multilock');
const rl = require('./ratelimit');
const { Captcha } = require('./captcha');
const { SlidingWindowStore } = require('./express-store');
const { FixedWindowStore } = require('./express-fixed-store');
const { keySlot } = require('./slot');
const { disconnect } = require('./adapter');

module.exports = {
  Lock, Semaphore, ReadWriteLock, MultiLock,
  RateLimiter: rl.RateLimiter,
  setGcraPolicy: rl.setGcraPolicy,
  setWindowPolicy: rl.setWindowPolicy,
  getPolicy: rl.getPolicy,
  deletePolicy: rl.deletePolicy,
  listPolicies: rl.listPolicies,
  Captcha,
  SlidingWindowStore,
  FixedWindowStore,
  keySlot,
  disconnect,
  McaptchaCacheError: errors.McaptchaCacheError,
  ServerError: errors.ServerError,
  InvalidArgument: errors.InvalidArgument,
  WrongType: errors.WrongType,
  CrossSlot: errors.CrossSlot,
  LockError: errors.LockError,
  LockNotOwned: errors.LockNotOwned,
  LockLost: errors.LockLost,
  LockNotAcquired: errors.LockNotAcquired,
  PermitsMismatch: errors.PermitsMismatch,
  RateLimited: errors.RateLimited,
  CaptchaError: errors.CaptchaError,
  CaptchaNotFound: errors.CaptchaNotFound,
  CaptchaExists: errors.CaptchaExists,
  ChallengeNotFound: errors.ChallengeNotFound,
  ChallengeExists: errors.ChallengeExists,
  InvalidCaptchaConfig: errors.InvalidCaptchaConfig,
  mapError: errors.mapError,
};
