"""Which verifier versions scored a run: kept for summary.json, and one version per kind unless the config allows more.

A run whose rewards came from two versions of a verifier (a service upgraded mid-run, shards running different
releases) trains on two reward functions at once and its curves compare nothing; so the first verdict of a second
version stops the run, unless `service.allow_mixed_verifier_versions` is set.
"""

from __future__ import annotations

from collections.abc import Iterable

from groupscore.schema.verdict import Verdict, split_versions

ALLOW_FLAG = "service.allow_mixed_verifier_versions"


class MixedVerifierVersions(ValueError):
    """Verdicts of one run came from two versions of the same verifier kind."""


class VersionLedger:
    """The versions of every verifier kind whose verdicts this run has seen, in order of first sight."""

    def __init__(self, allow_mixed: bool = False) -> None:
        self.allow_mixed = allow_mixed
        self.seen: dict[str, list[int]] = {}

    def record(self, verdicts: Iterable[Verdict]) -> None:
        """Note each verdict's `verifier_version`; raise MixedVerifierVersions at the first second version of a kind.

        Verdicts no verifier judged (invalid items, infra errors) carry no version and are skipped."""
        for verdict in verdicts:
            tag = verdict.verifier_version
            if not tag:
                continue
            for kind, version in split_versions(tag).items():
                versions = self.seen.setdefault(kind, [])
                if version in versions:
                    continue
                if versions and not self.allow_mixed:
                    raise MixedVerifierVersions(
                        f"verifier {kind!r} changed version within this run ({kind}@{versions[0]}, now "
                        f"{kind}@{version}): rewards from two versions are not one reward function; restart on one "
                        f"version, or set {ALLOW_FLAG}: true to train on both"
                    )
                versions.append(version)

    def summary(self) -> dict[str, int | list[int]]:
        """For summary.json: kind -> its version, or the list of versions when mixing was allowed and happened."""
        return {
            kind: versions[0] if len(versions) == 1 else sorted(versions)
            for kind, versions in sorted(self.seen.items())
        }
