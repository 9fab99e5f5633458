"""A groups request as items (`group_items`) and its verdicts back as groups with their statistics (`group_results`,
by schema/advantages.py, the formula the trainer uses too), for every way in (HTTP, a Ray Serve handle)."""

from __future__ import annotations

from typing import Any

from groupscore.schema.advantages import group_stats
from groupscore.schema.verdict import Status
from groupscore.schema.wire import GroupsRequest


def group_items(body: GroupsRequest) -> list[dict[str, Any]]:
    """Each group's completions as items of the group's reference fields, ids numbered within the group."""
    return [
        {**group.item, "completion": completion, "id": index}
        for group in body.groups
        for index, completion in enumerate(group.completions)
    ]


def group_results(body: GroupsRequest, verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = [component.name for component in body.reward.components] if body.reward else []
    results = []
    start = 0
    for group in body.groups:
        group_verdicts = verdicts[start : start + len(group.completions)]
        start += len(group.completions)
        masked = [v["status"] == Status.infra_error.value for v in group_verdicts]  # never judged: no fake 0
        total = group_stats([v["reward"] for v in group_verdicts], body.eps, body.std, masked)
        components = {}
        for name in names:
            # An item that failed validation has no component scores: it counts as 0, like its total.
            scores = [(v.get("components") or {}).get(name, 0.0) for v in group_verdicts]
            components[name] = group_stats(scores, body.eps, body.std, masked).model_dump()
        results.append(
            {"id": group.id, "results": group_verdicts, "total": total.model_dump(), "components": components}
        )
    return results
