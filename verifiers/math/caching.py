"""An LRU cache for short string keys only: repeats in RL batches are short answers, and long ones would fill memory."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any

MAX_KEY_CHARS = 512  # a longer answer is scored uncached: rare, and 16k of them would cost tens of megabytes


class ShortKeyCached[**Params, Result]:
    """A function whose calls with short string arguments are cached; `cache_clear` forgets them."""

    def __init__(self, fn: Callable[Params, Result], maxsize: int) -> None:
        self._fn = fn
        self._cached = lru_cache(maxsize=maxsize)(fn)
        wraps(fn)(self)

    def __call__(self, *args: Params.args, **kwargs: Params.kwargs) -> Result:
        chars = 0
        for arg in args:  # a plain loop: this runs several times per item of every batch
            if type(arg) is str:
                chars += len(arg)
        if chars > MAX_KEY_CHARS or kwargs:
            return self._fn(*args, **kwargs)
        return self._cached(*args)

    def cache_clear(self) -> None:
        self._cached.cache_clear()

    def cache_info(self) -> Any:
        return self._cached.cache_info()


def short_key_cache[**Params, Result](
    maxsize: int,
) -> Callable[[Callable[Params, Result]], ShortKeyCached[Params, Result]]:
    """`functools.lru_cache(maxsize)` for calls whose string arguments total at most MAX_KEY_CHARS characters."""

    def decorate(fn: Callable[Params, Result]) -> ShortKeyCached[Params, Result]:
        return ShortKeyCached(fn, maxsize)

    return decorate
