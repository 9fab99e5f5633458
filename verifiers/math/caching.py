"""An LRU cache for short string keys only: repeats in RL batches are short answers, and long ones would fill memory."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any, TypeVar

Result = TypeVar("Result")

MAX_KEY_CHARS = 512  # a longer answer is scored uncached: rare, and 16k of them would cost tens of megabytes


def short_key_cache(maxsize: int) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """`functools.lru_cache(maxsize)` for calls whose string arguments total at most MAX_KEY_CHARS characters."""

    def decorate(fn: Callable[..., Result]) -> Callable[..., Result]:
        cached = lru_cache(maxsize=maxsize)(fn)

        @wraps(fn)
        def call(*args: Any) -> Result:
            chars = 0
            for arg in args:  # a plain loop: this runs several times per item of every batch
                if type(arg) is str:
                    chars += len(arg)
            if chars > MAX_KEY_CHARS:
                return fn(*args)
            return cached(*args)

        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return call

    return decorate
