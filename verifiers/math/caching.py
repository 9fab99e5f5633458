"""An LRU cache for short string keys only: repeats in RL batches are short answers, and long ones would fill memory."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any, Protocol, cast

MAX_KEY_CHARS = 512  # a longer answer is scored uncached: rare, and 16k of them would cost tens of megabytes


class ShortKeyCached[**Params, Result](Protocol):
    """A function whose calls with short string arguments are cached; `cache_clear` forgets them."""

    def __call__(self, *args: Params.args, **kwargs: Params.kwargs) -> Result: ...

    def cache_clear(self) -> None: ...

    def cache_info(self) -> Any: ...


def short_key_cache[**Params, Result](
    maxsize: int,
) -> Callable[[Callable[Params, Result]], ShortKeyCached[Params, Result]]:
    """`functools.lru_cache(maxsize)` for calls whose string arguments total at most MAX_KEY_CHARS characters."""

    def decorate(fn: Callable[Params, Result]) -> ShortKeyCached[Params, Result]:
        cached = lru_cache(maxsize=maxsize)(fn)

        @wraps(fn)
        def call(*args: Any) -> Result:
            chars = 0
            for arg in args:  # a plain loop: this runs several times per item of every batch
                if type(arg) is str:
                    chars += len(arg)
            if chars > MAX_KEY_CHARS:
                return fn(*args)  # type: ignore[call-arg]
            return cached(*args)

        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return cast(ShortKeyCached[Params, Result], call)

    return decorate
