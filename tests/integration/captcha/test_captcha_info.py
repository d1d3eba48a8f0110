# SPDX-License-Identifier: BSD-3-Clause
"""INFO mcaptcha_cache_captcha: the captcha commands' outcomes, counted exactly
(field names follow INFO conventions: lower case, underscores, integers)."""

import pytest
import redis

CFG = '{"levels":[{"visitor_threshold":5,"difficulty_factor":50}],"duration":30}'
FIELDS = ["captchas_added", "captchas_deleted", "visits", "captcha_not_found", "challenges_added",
          "challenges_refused", "challenges_served", "challenges_deleted", "challenges_not_found"]


def _info(r):
    raw = r.info("mcaptcha_cache_captcha")
    return {f: int(raw["mcaptcha_cache_" + f]) for f in FIELDS}


def test_counters_move_with_traffic(r):
    before = _info(r)
    r.execute_command("MCAPTCHA_CACHE.ADD_CAPTCHA", "inf", CFG)
    for _ in range(3):
        r.execute_command("MCAPTCHA_CACHE.ADD_VISITOR", "inf")
    with pytest.raises(redis.ResponseError):
        r.execute_command("MCAPTCHA_CACHE.ADD_VISITOR", "nope")
    ch = '{"difficulty":50,"duration":30,"challenge":"%s"}'
    r.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "inf", ch % "a")
    r.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "inf", ch % "b")
    with pytest.raises(redis.ResponseError):
        r.execute_command("MCAPTCHA_CACHE.ADD_CHALLENGE", "inf", ch % "a")
    r.execute_command("MCAPTCHA_CACHE.GET_CHALLENGE", "inf", "a")
    r.execute_command("MCAPTCHA_CACHE.DELETE_CHALLENGE", "inf", "b")
    with pytest.raises(redis.ResponseError):
        r.execute_command("MCAPTCHA_CACHE.GET_CHALLENGE", "inf", "a")
    r.execute_command("MCAPTCHA_CACHE.DELETE_CAPTCHA", "inf")
    after = _info(r)
    delta = {f: after[f] - before[f] for f in FIELDS}
    assert delta == {"captchas_added": 1, "captchas_deleted": 1, "visits": 3, "captcha_not_found": 1,
                     "challenges_added": 2, "challenges_refused": 1, "challenges_served": 1,
                     "challenges_deleted": 1, "challenges_not_found": 1}
