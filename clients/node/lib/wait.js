// Waiting on the server: argument checks shared by the classes, the budget that splits a wait
// into WAIT rounds, and the runner of one blocking round on a dedicated connection with an
// AbortSignal and a guard timer. A round is one blocked command: the server queues it (first
// come first served) and answers when it is served or when its WAIT ends; nothing polls.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const { performance } = require('node:perf_hooks');
const { McaptchaCacheError } = require('./errors');

// Largest WAIT the module accepts (ms).
const MAX_WAIT_MS = 1099511627776;
// One round of an unbounded wait: the waiter re-queues at the tail once an hour.
const UNBOUNDED_ROUND_MS = 3600 * 1000;
// A wait with less than this left is over (the server's timer may answer a round a little
// before the client's deadline: no round of a millisecond or two follows).
const MIN_ROUND_MS = 10;
// A blocked command gets this much longer than its WAIT before its connection is given up.
const GUARD_GRACE_MS = 5000;

const now = () => performance.now();

function checkInt(name, v, min, max = Number.MAX_SAFE_INTEGER) {
  if (typeof v !== 'number' || !Number.isInteger(v)) {
    throw new TypeError(`${name} must be an integer, got ${typeof v === 'number' ? v : typeof v}`);
  }
  if (v < min || v > max) throw new RangeError(`${name} must be from ${min} to ${max}, got ${v}`);
  return v;
}

/** A duration in ms (integer >= min). */
function checkMs(name, v, min = 1) {
  return checkInt(name, v, min);
}

/** A wait: 0 tries once, N waits up to N ms, null/undefined/Infinity waits without end. */
function checkWaitMs(v) {
  if (v === null || v === undefined || v === Infinity) return null;
  return checkInt('waitMs', v, 0);
}

/** The error an aborted signal stands for (its reason, or an AbortError). */
function abortError(signal) {
  if (signal.reason !== undefined) return signal.reason;
  const e = new Error('This operation was aborted');
  e.name = 'AbortError';
  e.code = 'ABORT_ERR';
  return e;
}

function throwIfAborted(signal) {
  if (signal && signal.aborted) throw abortError(signal);
}

/** Splits a wait of `waitMs` (null: no end) into server-side WAIT rounds. */
class WaitBudget {
  constructor(waitMs) {
    this.waitMs = waitMs;
    this.deadline = waitMs === null ? null : now() + waitMs;
  }

  /** The WAIT of the next round (0: answer at once). */
  nextRoundMs() {
    if (this.deadline === null) return UNBOUNDED_ROUND_MS;
    const left = Math.floor(this.deadline - now());
    return left <= 0 ? 0 : Math.min(left, MAX_WAIT_MS);
  }

  expired() {
    return this.waitMs === 0 || (this.deadline !== null && now() >= this.deadline - MIN_ROUND_MS);
  }
}

/** No reply to a blocked command within its WAIT and the grace: the connection was given up. */
class WaitTimeout extends McaptchaCacheError {}

/**
 * Send one blocking command (`argv`, whose WAIT is `roundMs`) on the dedicated connection
 * `raw` of adapter `ad`. An abort of `signal`, or no reply within roundMs + grace, closes that
 * connection (the server forgets the waiter) and rejects with the abort reason / WaitTimeout;
 * `raw.__dead` is then true and the connection must not be reused.
 */
async function sendBlocking(ad, raw, argv, routeKey, roundMs, signal) {
  let cause = null;
  let killed;
  // settles with the cause as soon as the connection is given up, whether or not the library
  // ever settles the command it had queued there (an ioredis Cluster still connecting keeps it)
  const giveUp = new Promise((resolve, reject) => { killed = reject; });
  const kill = (why) => {
    if (cause) return;
    cause = why;
    raw.__dead = true;
    killed(why);
    ad.destroy(raw);
  };
  const onAbort = () => kill(abortError(signal));
  const guard = setTimeout(() => kill(new WaitTimeout(
    `no reply to ${argv[0]} within its WAIT of ${roundMs} ms and ${GUARD_GRACE_MS} ms more`)),
  roundMs + GUARD_GRACE_MS);
  if (signal) signal.addEventListener('abort', onAbort, { once: true });
  const sent = ad.send(argv, routeKey, raw);
  sent.catch(() => {});
  giveUp.catch(() => {});
  try {
    const reply = await Promise.race([sent, giveUp]);
    if (cause) throw cause;
    return reply;
  } catch (e) {
    throw cause || e;
  } finally {
    clearTimeout(guard);
    if (signal) signal.removeEventListener('abort', onAbort);
  }
}

/** Resolves after ms (only to keep a loop that was answered early from spinning). */
function pause(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

module.exports = {
  MAX_WAIT_MS, UNBOUNDED_ROUND_MS, GUARD_GRACE_MS, now,
  checkInt, checkMs, checkWaitMs, abortError, throwIfAborted, WaitBudget, WaitTimeout, sendBlocking, pause,
};
