"""Environment sessions on Ray Serve, through Serve's HTTP ingress (HAProxy, the default): two replicas; every call of a
session reaches the replica that holds it, whichever replica HTTP hands it to; a killed replica's sessions are lost
(their verdict infra_error, never 0) while the other's still score; a client's sessions close on every replica.

Cost: about a minute on the 2-core VM (Ray and Serve ~25 s, the deployment ~15 s); Ray is shut down at the end.
"""

from __future__ import annotations

import time

import pytest

ray = pytest.importorskip("ray", reason="Ray is the optional extra groupscore[ray]; `make` installs it")

from ray import serve  # noqa: E402

from groupscore.client.sessions import SessionsClient  # noqa: E402
from groupscore.service.embedded import free_port  # noqa: E402
from groupscore.service.ray_deploy import RayTarget, start_or_join  # noqa: E402
from groupscore.service.ray_sessions import SEPARATOR, split  # noqa: E402

TASK = "demo:count-errors"
RIGHT = "grep -c ' ERROR ' app.log > errors.txt"


@pytest.fixture(scope="module")
def url():
    """Two replicas of half a CPU on a local one-node cluster, through Serve's HTTP ingress on a free port."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="serve")
    target = RayTarget(http_port=free_port(), num_replicas=2, num_cpus=0.5, settings={"deadline_s": 60})
    try:
        with start_or_join(target) as base_url:
            yield base_url
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()


def open_on_both(env: SessionsClient, count: int) -> dict[str, list[str]]:
    """Sessions opened one by one until both replicas hold some: {replica: [session ids]}."""
    held: dict[str, list[str]] = {}
    for _ in range(40):
        if sum(map(len, held.values())) >= count and len(held) == 2:
            break
        (opening,) = env.open_group(TASK)
        replica, _ = split(opening.session_id)
        assert replica is not None, opening.session_id
        held.setdefault(replica, []).append(opening.session_id)
    assert len(held) == 2, held
    return held


def test_steps_reach_the_holder_and_a_lost_replica_makes_its_sessions_infra_error(url):
    with SessionsClient(url) as env:
        held = open_on_both(env, 8)
        sessions = [s for ids in held.values() for s in ids]
        for session_id in sessions:
            token = session_id.replace(SEPARATOR, "-")
            assert not env.step(session_id, "write_file", {"path": "mark.txt", "content": token}).is_error
            for _ in range(5):  # state kept between steps: every step ran on the replica holding the session
                seen = env.step(session_id, "shell", {"command": "cat mark.txt"})
                assert seen.content.strip() == token, (session_id, seen)
            assert not env.step(session_id, "shell", {"command": RIGHT}).is_error

        doomed, kept = sorted(held)
        name = f"SERVE_REPLICA::groupscore#GroupScore#{doomed}"
        ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)
        started = time.monotonic()
        for session_id in held[doomed]:  # a score may be sent again: through a connection to the dead replica too
            verdict = env.score(session_id)
            assert verdict.status == "infra_error" and verdict.reward == 0.0, verdict
        lost_after_s = time.monotonic() - started
        assert lost_after_s < 30, lost_after_s
        for session_id in held[doomed]:  # a step whose connection died with the replica is resent under its number
            observation = env.step(session_id, "shell", {"command": "true"})
            assert observation.done and observation.is_error, observation
        for session_id in held[kept]:
            verdict = env.score(session_id)
            assert (verdict.status, verdict.reward) == ("correct", 1.0), verdict
        assert env.close_client() == len(held[kept])  # what was still open, on the replica that is left
