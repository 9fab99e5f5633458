"""Scores a FormatItem: each required tag once, in order, non-empty (optionally nothing outside), or a regex match."""

from __future__ import annotations

from dataclasses import dataclass

from groupscore.schema.verdict import Status, Verdict
from groupscore.verifiers.format.item import FormatItem
from groupscore.verifiers.text import compile_linear


@dataclass(frozen=True)
class _Check:
    ok: bool
    reason: str


def _tag_checks(text: str, tags: list[str], allow_outside_text: bool) -> tuple[list[_Check], str | None]:
    """One check per tag (plus one for outside text when forbidden), and the content of the last tag found."""
    checks: list[_Check] = []
    outside: list[str] = []
    pos = 0
    last_content: str | None = None
    for tag in tags:
        opening, closing = f"<{tag}>", f"</{tag}>"
        # Exactly once: a second block (or a stray tag) is how a model games "contains an <answer>".
        n_open, n_close = text.count(opening), text.count(closing)
        if n_open != 1 or n_close != 1:
            checks.append(
                _Check(False, f"{opening} and {closing} must each appear once (found {n_open} and {n_close})")
            )
            continue
        start = text.find(opening, pos)
        end = text.find(closing, start + len(opening)) if start >= 0 else -1
        if start < 0 or end < 0:
            checks.append(_Check(False, f"{opening}...{closing} is out of order"))
            continue
        content = text[start + len(opening) : end]
        if not content.strip():
            checks.append(_Check(False, f"{opening}{closing} is empty"))
        else:
            checks.append(_Check(True, f"{opening} ok"))
            last_content = content.strip()
        outside.append(text[pos:start])
        pos = end + len(closing)
    outside.append(text[pos:])
    if not allow_outside_text:
        stray = next((s.strip() for s in outside if s.strip()), None)
        checks.append(_Check(stray is None, "text outside the tags" + (f": {stray[:40]!r}" if stray else "")))
    return checks, last_content


def score_format(item: FormatItem) -> Verdict:
    text = item.completion
    if len(text) > item.max_chars:
        return Verdict(
            id=item.id,
            reward=0.0,
            status=Status.incorrect,
            reason=f"completion has {len(text)} characters, more than max_chars={item.max_chars}",
        )
    if item.regex is not None:
        subject = text.strip() if item.strip else text
        matched = compile_linear(item.regex).fullmatch(subject) is not None
        return Verdict(
            id=item.id,
            reward=1.0 if matched else 0.0,
            status=Status.correct if matched else Status.incorrect,
            reason="matches the pattern" if matched else "does not match the whole pattern",
        )

    checks, last_content = _tag_checks(text, item.tags, item.allow_outside_text)
    passed = sum(c.ok for c in checks)
    failed = [c.reason for c in checks if not c.ok]
    if not failed:
        reward, status, reason = 1.0, Status.correct, f"{len(item.tags)} tag(s) present in order"
    else:
        reward = passed / len(checks) if item.partial_credit else 0.0
        status = Status.partial if reward > 0 else Status.incorrect
        reason = "; ".join(failed)
    return Verdict(
        id=item.id,
        reward=reward,
        status=status,
        extracted=last_content,
        reason=reason,
        details={"checks_passed": passed, "checks": len(checks)},
    )
