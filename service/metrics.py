"""Prometheus metrics of one service instance (own registry, so several apps can live in one process)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from groupscore.schema.verdict import INFRA_CAUSES
from groupscore.verifiers.registry import KINDS

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "groupscore_requests", "HTTP requests by endpoint and status code.", ["endpoint", "code"], registry=r
        )
        self.latency = Histogram(
            "groupscore_request_seconds",
            "HTTP request latency by endpoint.",
            ["endpoint"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.task_latency = Histogram(
            "groupscore_task_seconds",
            "Time from submitting a task (a slice of a request's items) to the pool to its verdicts.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.items = Counter(
            "groupscore_items", "Items scored by verifier kind and verdict status.", ["verifier", "status"], registry=r
        )
        self.timeouts = Counter(
            "groupscore_item_timeouts",
            "Items answered with a timeout verdict (a program or a comparison ran past its own limit), by cause.",
            ["cause"],
            registry=r,
        )
        self.infra_errors = Counter(
            "groupscore_infra_errors",
            "Items answered with an infra_error verdict (nothing "
            "judged them: sandbox, dead worker, request deadline), by cause.",
            ["cause"],
            registry=r,
        )
        for cause in INFRA_CAUSES:  # every cause shows from the start (0), so a dashboard's rate() has a series
            self.infra_errors.labels(cause)
        self.sandbox_failures = Counter(
            "groupscore_sandbox_failures", "Code runs where the sandbox itself failed (not the program).", registry=r
        )
        self.worker_restarts = Counter(
            "groupscore_worker_pool_restarts",
            "Scoring worker processes replaced after one died or was killed for overrunning.",
            registry=r,
        )
        self.stuck_tasks = Counter(
            "groupscore_stuck_tasks",
            "Tasks still running long after their request's deadline; their workers were replaced.",
            registry=r,
        )
        self.rejected = Counter(
            "groupscore_rejected_requests", "Requests refused before scoring, by reason.", ["reason"], registry=r
        )
        self.queue_depth = Gauge("groupscore_queue_depth_items", "Items admitted and not yet answered.", registry=r)
        self.workers = Gauge("groupscore_workers", "Scoring processes.", registry=r)

    def count_verdicts(self, raw_items: Iterable[Any], verdicts: Iterable[dict[str, Any]]) -> None:
        """Items per verifier and status; timeouts the verifiers reported; infra errors by cause; sandbox failures."""
        # Tallied first, then one increment per label pair: a labelled increment costs microseconds, and a
        # 1024-item batch would otherwise spend milliseconds here on the event loop.
        per_label: Tally[tuple[str, str]] = Tally()
        infra: Tally[str] = Tally()
        verifier_timeouts = 0
        for raw, verdict in zip(raw_items, verdicts):
            kind = raw.get("verifier") if isinstance(raw, dict) else None
            kind = (
                kind if isinstance(kind, str) and kind in KINDS else "invalid"
            )  # only known names: labels must stay few
            status = verdict.get("status", "error")
            per_label[kind, status] += 1
            if status == "timeout":
                verifier_timeouts += 1
            elif status == "infra_error":
                cause = (verdict.get("details") or {}).get("infra")
                infra[cause if cause in INFRA_CAUSES else "internal"] += 1
        for (kind, status), count in per_label.items():
            self.items.labels(kind, status).inc(count)
        if verifier_timeouts:
            self.timeouts.labels("verifier").inc(verifier_timeouts)
        for cause, count in infra.items():
            self.infra_errors.labels(cause).inc(count)
        if infra["sandbox"]:
            self.sandbox_failures.inc(infra["sandbox"])
