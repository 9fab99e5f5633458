"""What the sandbox raises: SandboxUnavailable when isolation cannot be set up, BadRunRequest for a run it refuses."""

from __future__ import annotations


class SandboxUnavailable(RuntimeError):
    """nsjail (or a piece it needs) is missing or cannot start; nothing was run.

    The message names what is missing and how to get it. Code is never run unsandboxed instead.
    """


class BadRunRequest(ValueError):
    """The run's own arguments are unacceptable (a bad file name, a missing main file, inputs too large, text that
    cannot be encoded): nothing was run. Only this counts as a refused request; any other exception inside the
    sandbox is the sandbox's own failure, never the request's."""
