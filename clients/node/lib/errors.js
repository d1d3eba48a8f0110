// SPDX-License-Identifier: BSD-3-Clause
// Typed errors of the client, and the mapping from the module's error replies to them.
// ioredis (ReplyError) and node-redis (ErrorReply) both keep the server's message with its code
// ("ERR ...", "WRONGTYPE ..."); mapError turns such an error into the narrowest class below and
// keeps the original as `cause` and the message as `reply`. Errors that are not server replies
// (connection errors, timeouts) pass through unchanged.
//
//   McaptchaCacheError
//   ├── ServerError                  an error reply not mapped to anything narrower
//   │   ├── InvalidArgument          range errors, unknown options, bad owner, cost too large
//   │   ├── WrongType                WRONGTYPE: the key holds another type
//   │   └── CrossSlot                keys of one command in different hash slots
//   ├── LockError
//   │   ├── LockNotOwned             this owner does not hold the lock
//   │   │   └── LockLost             it did, and lost it (lease ended, key deleted, ...)
//   │   ├── LockNotAcquired          not acquired within waitMs
//   │   └── PermitsMismatch          PERMITS differs from the held semaphore's size
//   ├── RateLimited                  refused by a limiter (.decision)
//   └── CaptchaError
//       ├── CaptchaNotFound, CaptchaExists, ChallengeNotFound, ChallengeExists
//       └── InvalidCaptchaConfig     invalid JSON, config or challenge
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

class McaptchaCacheError extends Error {
  constructor(message, options) {
    super(message);
    this.name = new.target.name;
    if (options && options.cause !== undefined) this.cause = options.cause;
    if (options && options.reply !== undefined) this.reply = options.reply;
  }
}

/** An error reply of the server; `reply` is its message (with its code, e.g. "ERR ..."). */
class ServerError extends McaptchaCacheError {}
class InvalidArgument extends ServerError {}
class WrongType extends ServerError {}
/** Keys in different hash slots; raised by the client before sending (then `slots` lists them). */
class CrossSlot extends ServerError {}

class LockError extends McaptchaCacheError {}
class LockNotOwned extends LockError {}
class LockLost extends LockNotOwned {}
class LockNotAcquired extends LockError {}
class PermitsMismatch extends LockError {}

/** A limiter refused the request: `decision` is its answer, `retryAfterMs` its hint. */
class RateLimited extends McaptchaCacheError {
  constructor(decision, key) {
    super(decision.retryAfterMs < 0
      ? `rate limited (${key}): the cost can never fit`
      : `rate limited (${key}): retry after ${decision.retryAfterMs} ms`);
    this.decision = decision;
    this.key = key;
    this.retryAfterMs = decision.retryAfterMs;
  }
}

class CaptchaError extends McaptchaCacheError {}
class CaptchaNotFound extends CaptchaError {}
class CaptchaExists extends CaptchaError {}
class ChallengeNotFound extends CaptchaError {}
class ChallengeExists extends CaptchaError {}
class InvalidCaptchaConfig extends CaptchaError {}

// The bare mCaptcha replies (no code), then prefixes of the message without "ERR ".
const EXACT = new Map([
  ['Captcha not found', CaptchaNotFound],
  ['Challenge not found', ChallengeNotFound],
  ['Challenge already exists', ChallengeExists],
]);
const PREFIXES = [
  ['WRONGTYPE', WrongType],
  ['CROSSSLOT', CrossSlot],
  ['the lock is not held by this owner', LockNotOwned],
  ['the locks are not all held by this owner', LockNotOwned],
  ['PERMITS differs', PermitsMismatch],
  ['captcha already exists', CaptchaExists],
  ['target captcha already exists', CaptchaExists],
  ['invalid JSON', InvalidCaptchaConfig],
  ['invalid config', InvalidCaptchaConfig],
  ['invalid challenge', InvalidCaptchaConfig],
  ['unknown option', InvalidArgument],
  ['owner must be', InvalidArgument],
  ['cost too large', InvalidArgument],
  ['no such policy', InvalidArgument],
  ['policy ', InvalidArgument],
];
const CONTAINS = [[' must be ', InvalidArgument], [' needs a value', InvalidArgument]];

/** Whether `err` is an error reply of the server (ioredis ReplyError, node-redis ErrorReply). */
function isReplyError(err) {
  if (!(err instanceof Error)) return false;
  for (let p = Object.getPrototypeOf(err); p && p !== Error.prototype; p = Object.getPrototypeOf(p)) {
    const n = p.constructor && p.constructor.name;
    if (n === 'ReplyError' || n === 'ErrorReply') return true;
  }
  return err.name === 'ReplyError';
}

/** The class for a server message ("ERR ..." or a bare mCaptcha reply). */
function classFor(message) {
  const msg = message.startsWith('ERR ') ? message.slice(4) : message;
  const exact = EXACT.get(msg);
  if (exact) return exact;
  for (const [p, cls] of PREFIXES) if (msg.startsWith(p)) return cls;
  for (const [s, cls] of CONTAINS) if (msg.includes(s)) return cls;
  return ServerError;
}

/**
 * The typed error for `err`: a server error reply becomes the class its message names (the
 * original kept as `cause`, the message as `reply`); anything else is returned unchanged.
 */
function mapError(err) {
  if (err instanceof McaptchaCacheError || !isReplyError(err)) return err;
  const cls = classFor(err.message);
  return new cls(err.message, { cause: err, reply: err.message });
}

module.exports = {
  McaptchaCacheError, ServerError, InvalidArgument, WrongType, CrossSlot,
  LockError, LockNotOwned, LockLost, LockNotAcquired, PermitsMismatch,
  RateLimited,
  CaptchaError, CaptchaNotFound, CaptchaExists, ChallengeNotFound, ChallengeExists,
  InvalidCaptchaConfig,
  mapError, isReplyError,
};
