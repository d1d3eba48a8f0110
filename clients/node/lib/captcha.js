// mCaptcha captchas and challenges on the MCAPTCHA_CACHE.* commands: a captcha's difficulty
// levels over a leaky-bucket visitor count, and one-shot challenges. Durations are in seconds,
// as mCaptcha's are.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const { Adapter } = require('./adapter');
const { assertSameSlot } = require('./slot');
const { checkInt } = require('./wait');

const U32 = 4294967295;
const VISIT_INFO_DEPRECATED = 'Captcha.visitInfo() counts a visit; call visitWithDuration() '
  + '(the same, clearly named) or count() (a query that counts nothing)';
let visitInfoWarned = false;

function levelsJson(levels, durationS) {
  checkInt('durationS', durationS, 1, U32);
  if (!Array.isArray(levels)) throw new TypeError('levels must be an array of [visitorThreshold, difficultyFactor] or objects');
  const out = levels.map((lv) => {
    const t = Array.isArray(lv) ? lv[0] : (lv.visitorThreshold ?? lv.visitor_threshold);
    const d = Array.isArray(lv) ? lv[1] : (lv.difficultyFactor ?? lv.difficulty_factor);
    return { visitor_threshold: checkInt('visitorThreshold', t, 0, U32), difficulty_factor: checkInt('difficultyFactor', d, 0, U32) };
  });
  return JSON.stringify({ levels: out, duration: durationS });
}

class Captcha {
  /** new Captcha(client, name): mCaptcha's captcha (site key) `name`. */
  constructor(client, name) {
    this.client = client;
    this._ad = Adapter.of(client);
    this.name = name;
  }

  _cmd(cmd, ...args) {
    const k = this._ad.key(this.name);
    return this._ad.send([cmd, k, ...args], k);
  }

  /**
   * ADD_CAPTCHA: levels [[visitorThreshold, difficultyFactor], ...] (or objects with those
   * fields), distinct thresholds, difficulties not decreasing; durationS: seconds each visit
   * counts. Rejects with CaptchaExists or InvalidCaptchaConfig.
   */
  async add(levels, durationS = 30) {
    await this._cmd('MCAPTCHA_CACHE.ADD_CAPTCHA', levelsJson(levels, durationS));
  }

  /** ADD_VISITOR: count one visit; resolves to the difficulty factor. */
  async visit() {
    return (await this.visitWithDuration()).difficulty;
  }

  /** ADD_VISITOR: count one visit, as visit(); resolves to {difficulty, durationS}. */
  async visitWithDuration() {
    const d = JSON.parse(await this._cmd('MCAPTCHA_CACHE.ADD_VISITOR'));
    return { difficulty: Number(d.difficulty_factor), durationS: Number(d.duration) };
  }

  /**
   * Deprecated: counts a visit although its name reads like a query (as the Python client's
   * visit_info()). The old name of visitWithDuration(), which it calls; emits a
   * DeprecationWarning (code MCAPTCHA_CACHE_VISIT_INFO) once per process. To read without
   * counting, call count(): the module has no read-only command for the difficulty.
   */
  async visitInfo() {
    if (!visitInfoWarned) {
      visitInfoWarned = true;
      process.emitWarning(VISIT_INFO_DEPRECATED, { type: 'DeprecationWarning', code: 'MCAPTCHA_CACHE_VISIT_INFO' });
    }
    return this.visitWithDuration();
  }

  /**
   * GET: the visits still counting. A query: counts nothing (the difficulty for this count is
   * that of the levels given to add()).
   */
  async count() { return Number(await this._cmd('MCAPTCHA_CACHE.GET')); }

  /** Whether the captcha exists (CAPTCHA_EXISTS answers 0 when it does). */
  async exists() { return Number(await this._cmd('MCAPTCHA_CACHE.CAPTCHA_EXISTS')) === 0; }

  /** DELETE_CAPTCHA; rejects with CaptchaNotFound. */
  async delete() { await this._cmd('MCAPTCHA_CACHE.DELETE_CAPTCHA'); }

  /**
   * RENAME_CAPTCHA (live count included); resolves to the captcha under its new name. With a
   * Cluster client both names must hash to one slot (CrossSlot, raised before sending).
   */
  async rename(newName) {
    const nk = this._ad.key(newName);
    if (this._ad.cluster) assertSameSlot([this._ad.key(this.name), nk], 'MCAPTCHA_CACHE.RENAME_CAPTCHA');
    await this._cmd('MCAPTCHA_CACHE.RENAME_CAPTCHA', nk);
    return new Captcha(this.client, newName);
  }

  /** ADD_CHALLENGE: a one-shot challenge expiring durationS seconds later; rejects with ChallengeExists. */
  async addChallenge(challenge, difficulty, durationS) {
    const json = JSON.stringify({
      difficulty: checkInt('difficulty', difficulty, 0, U32), duration: checkInt('durationS', durationS, 1, U32), challenge: String(challenge),
    });
    await this._cmd('MCAPTCHA_CACHE.ADD_CHALLENGE', json);
  }

  /** GET_CHALLENGE: take the challenge (deleted); resolves to {difficulty, durationS}; rejects with ChallengeNotFound. */
  async getChallenge(challenge) {
    const d = JSON.parse(await this._cmd('MCAPTCHA_CACHE.GET_CHALLENGE', String(challenge)));
    return { difficulty: Number(d.difficulty_factor), durationS: Number(d.duration) };
  }

  /** DELETE_CHALLENGE; rejects with ChallengeNotFound. */
  async deleteChallenge(challenge) { await this._cmd('MCAPTCHA_CACHE.DELETE_CHALLENGE', String(challenge)); }
}

module.exports = { Captcha };
