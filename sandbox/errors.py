"""The one exception the sandbox raises when isolation cannot be set up."""

from __future__ import annotations


class SandboxUnavailable(RuntimeError):
    """nsjail (or a piece it needs) is missing or cannot start; nothing was run.

    The message names what is missing and how to get it. Code is never run unsandboxed instead.
    """
