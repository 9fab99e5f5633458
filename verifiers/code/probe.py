"""Whether the sandbox can run a program now: one harmless program in a fresh jail (the service's readiness asks, and
through it the Ray deployment's health check), so a replica without a working sandbox is taken out of routing instead
of answering code items with infra_error verdicts."""

from __future__ import annotations

from groupscore.verifiers.code.run_program import ProgramRun, SandboxUnavailable, run_program

_PROBE = ProgramRun(code="print(6 * 7)", run_timeout_s=20.0)


def sandbox_problem() -> str | None:
    """None when a jail ran the probe program and it printed what it should; else why not, in one line."""
    try:
        result = run_program(_PROBE)
    except SandboxUnavailable as exc:
        return f"sandbox unavailable: {exc}"
    except Exception as exc:  # noqa: BLE001 - whatever stops the probe makes the sandbox unusable here
        return f"sandbox probe failed: {type(exc).__name__}: {exc}"
    if result.status.value != "ok" or result.stdout.strip() != "42":
        why = result.error or result.stderr.strip()[-200:] or f"printed {result.stdout[:40]!r}"
        return f"sandbox probe jail ended {result.status.value}: {why}".replace("\n", " ")
    return None
