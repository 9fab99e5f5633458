"""Misspelt GROUPSCORE_* variables: each part reads its own settings from the environment and ignores every other
name, so GROUPSCORE_WORKERS spelt with a letter missing would do nothing, silently. `groupscore serve` warns about
each variable no part reads, naming the closest one that is read."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

PREFIX = "GROUPSCORE_"
# Read by the tests and tools, never by groupscore (docs/service/settings.md): not misspellings.
TEST_ONLY = ("GROUPSCORE_FULL_PIN_CHECK", "GROUPSCORE_SCHEMATHESIS_EXAMPLES")


def known_variables() -> set[str]:
    """Every variable a part's settings object reads (the README's settings table)."""
    from groupscore.bounded.settings import BoundedSettings
    from groupscore.client.settings import ClientSettings
    from groupscore.sandbox.settings import SandboxSettings, env_name
    from groupscore.service.settings import Settings
    from groupscore.verifiers.settings import VerifierSettings

    models = (Settings, ClientSettings, VerifierSettings)
    names = {f"{PREFIX}{field.upper()}" for model in models for field in model.model_fields}
    names |= {env_name(field) for field in SandboxSettings.model_fields}
    names |= {variable for _, variable, _ in BoundedSettings.VARIABLES}
    return names | set(TEST_ONLY)


def unknown_variables(environ: Mapping[str, str] | None = None, known: Iterable[str] | None = None) -> list[str]:
    """One warning line per GROUPSCORE_* variable that no part reads, with the closest that is."""
    from groupscore.schema.names import closest

    environ = os.environ if environ is None else environ
    known = sorted(known_variables() if known is None else known)
    lines = []
    for name in sorted(n for n in environ if n.upper().startswith(PREFIX) and n.upper() not in known):
        match = closest(name.upper(), known)
        hint = f"; did you mean {match}?" if match else ""
        lines.append(f"warning: {name} is not a groupscore setting and is ignored{hint}")
    return lines
