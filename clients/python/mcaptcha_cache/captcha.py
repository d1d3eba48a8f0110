# SPDX-License-Identifier: BSD-3-Clause
"""mCaptcha captchas and challenges on the ``MCAPTCHA_CACHE.*`` commands (sync). Durations of
the mCaptcha commands are in **seconds** (as mCaptcha's)."""

from __future__ import annotations

import warnings
from typing import Any, Iterable, Tuple, Union

import redis.exceptions

from ._common import Challenge, captcha_config_json, challenge_json, parse_challenge, parse_visit
from .errors import map_error

__all__ = ["Captcha"]

VISIT_INFO_DEPRECATED = ("Captcha.visit_info() counts a visit; call visit_with_duration() "
                         "(the same, clearly named) or count() (a query that counts nothing)")


class Captcha:
    """One captcha (mCaptcha's site key ``name``): difficulty levels over a leaky-bucket
    visitor count.

    ``Captcha(client, name)``; ``add(levels=[(threshold, difficulty), ...], duration_s=30)``
    creates it; ``visit() -> int`` counts a visit (for ``duration_s`` seconds) and returns the
    difficulty factor that applies: that of the highest level whose threshold is strictly
    below the count after this visit, else the lowest level's. ``count() -> int``: visits
    still counting. Errors: :class:`CaptchaNotFound`, :class:`CaptchaExists`,
    :class:`InvalidCaptchaConfig`, :class:`ChallengeNotFound`, :class:`ChallengeExists`."""

    def __init__(self, client: Any, name: Union[str, bytes]) -> None:
        self.client = client
        self.name = name

    def _cmd(self, *args: Any) -> Any:
        try:
            return self.client.execute_command(*args)
        except redis.exceptions.ResponseError as e:
            raise map_error(e) from e

    def add(self, levels: Iterable[Any], duration_s: int = 30) -> None:
        """``MCAPTCHA_CACHE.ADD_CAPTCHA``: ``levels`` is a list of ``(visitor_threshold,
        difficulty_factor)`` pairs (or dicts with those keys), u32 each, distinct thresholds,
        difficulties > 0 not decreasing as the threshold grows; ``duration_s``: seconds each
        visit counts (>= 1). Raises :class:`CaptchaExists` or :class:`InvalidCaptchaConfig`."""
        self._cmd("MCAPTCHA_CACHE.ADD_CAPTCHA", self.name, captcha_config_json(levels, duration_s))

    def visit(self) -> int:
        """``MCAPTCHA_CACHE.ADD_VISITOR``: count one visit; returns the difficulty factor (int)."""
        return parse_visit(self._cmd("MCAPTCHA_CACHE.ADD_VISITOR", self.name))[0]

    def visit_with_duration(self) -> Tuple[int, int]:
        """Count one visit, as :meth:`visit`, returning ``(difficulty_factor, duration_s)``."""
        return parse_visit(self._cmd("MCAPTCHA_CACHE.ADD_VISITOR", self.name))

    def visit_info(self) -> Tuple[int, int]:
        """Deprecated: counts a visit (its name reads like a query). Use
        :meth:`visit_with_duration` to count one, :meth:`count` to read without counting."""
        warnings.warn(VISIT_INFO_DEPRECATED, DeprecationWarning, stacklevel=2)
        return self.visit_with_duration()

    def count(self) -> int:
        """``MCAPTCHA_CACHE.GET``: the visits still counting (int). A query: counts nothing
        (the module has no read-only command for the difficulty; it is that of the levels
        given to :meth:`add` for this count)."""
        return int(self._cmd("MCAPTCHA_CACHE.GET", self.name))

    def exists(self) -> bool:
        """Whether the captcha exists (``CAPTCHA_EXISTS``'s inverted 0/1 turned into a bool)."""
        return int(self._cmd("MCAPTCHA_CACHE.CAPTCHA_EXISTS", self.name)) == 0

    def delete(self) -> None:
        """``MCAPTCHA_CACHE.DELETE_CAPTCHA``. Raises :class:`CaptchaNotFound`."""
        self._cmd("MCAPTCHA_CACHE.DELETE_CAPTCHA", self.name)

    def rename(self, new_name: Union[str, bytes]) -> "Captcha":
        """``MCAPTCHA_CACHE.RENAME_CAPTCHA`` (live count included); returns the captcha under
        its new name. In Redis Cluster both names must hash to one slot (:class:`CrossSlot`)."""
        self._cmd("MCAPTCHA_CACHE.RENAME_CAPTCHA", self.name, new_name)
        return type(self)(self.client, new_name)

    def add_challenge(self, challenge: Union[str, bytes], difficulty: int, duration_s: int) -> None:
        """``MCAPTCHA_CACHE.ADD_CHALLENGE``: store a one-shot challenge string that expires
        ``duration_s`` seconds later. Raises :class:`ChallengeExists`."""
        self._cmd("MCAPTCHA_CACHE.ADD_CHALLENGE", self.name,
                  challenge_json(challenge, difficulty, duration_s))

    def get_challenge(self, challenge: Union[str, bytes]) -> Challenge:
        """``MCAPTCHA_CACHE.GET_CHALLENGE``: take the challenge (it is deleted); returns a
        :class:`Challenge` (``difficulty``, ``duration_s``). Raises :class:`ChallengeNotFound`."""
        return parse_challenge(self._cmd("MCAPTCHA_CACHE.GET_CHALLENGE", self.name, challenge))

    def delete_challenge(self, challenge: Union[str, bytes]) -> None:
        """``MCAPTCHA_CACHE.DELETE_CHALLENGE``. Raises :class:`ChallengeNotFound`."""
        self._cmd("MCAPTCHA_CACHE.DELETE_CHALLENGE", self.name, challenge)

    def __repr__(self) -> str:
        return "<Captcha %r>" % (self.name,)
