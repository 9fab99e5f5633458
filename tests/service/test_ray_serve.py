"""The scoring service on a real Ray cluster (`ray.cluster_utils.Cluster`, two nodes of one CPU each, on this machine):
two replicas, one per node, each sized to its one CPU; math and code groups scored through Serve's HTTP ingress (the
default one: HAProxy straight to the replicas) and through a Serve handle come back exactly as the single-process service scores them; a replica killed mid-batch loses
no item; a replica whose sandbox fails its readiness (a third node without nsjail) is never routed to.

Cost: about a minute and a half on the 2-core VM (the cluster ~25 s, the deployment ~15 s, the rest scoring), all of
it in this module; the cluster and Serve are shut down at its end, and the test fails if a raylet is left behind.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is the optional extra groupscore[ray]; `make` installs it")

from helpers import py  # noqa: E402
from ray import serve  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from groupscore.client.http import ScoreClient  # noqa: E402
from groupscore.client.serve_handle import ServeHandleClient  # noqa: E402
from groupscore.service.embedded import free_port, start_embedded  # noqa: E402
from groupscore.service.ray_app import GroupScore  # noqa: E402
from groupscore.service.ray_deploy import RayTarget, default_address, start_or_join  # noqa: E402

pytestmark = pytest.mark.slow

REWARD = {
    "components": [
        {"name": "correct", "weight": 1.0},
        {"name": "format", "weight": 0.5, "verifier": "format", "params": {"tags": ["answer"]}},
    ]
}
DOUBLE = [{"type": "stdio", "stdin": "3\n", "stdout": "6\n"}, {"type": "stdio", "stdin": "5\n", "stdout": "10\n"}]


def math_groups() -> list[dict]:
    answers = [("12", ["12", "13", "<answer>12</answer> so \\boxed{12}", "x"]), ("7/2", ["3.5", "\\frac72", "7", "2"])]
    return [
        {
            "id": f"m{index}",
            "item": {"verifier": "math", "answer": answer},
            "completions": [c if "boxed" in c else f"The result is \\boxed{{{c}}}." for c in completions],
        }
        for index, (answer, completions) in enumerate(answers)
    ]


def code_groups() -> list[dict]:
    programs = ["print(int(input()) * 2)", "print(int(input()) + 4)", "print(6 if input() == '3' else 0)"]
    return [{"id": "c0", "item": {"verifier": "code", "tests": DOUBLE}, "completions": [py(p) for p in programs]}]


def comparable(groups) -> list[dict]:
    """Groups as plain data without what timing decides (wall times in a code verdict's details)."""
    out = []
    for group in groups:
        data = group.model_dump(mode="json")
        for verdict in data["results"]:
            verdict.pop("details", None)
        out.append(data)
    return out


@pytest.fixture(scope="module")
def reference() -> dict[str, list[dict]]:
    """What the single-process service says for the same groups (scored before the cluster starts)."""
    with start_embedded(workers=1) as url, ScoreClient(url) as client:
        return {
            "math": comparable(client.score_groups(math_groups(), reward=REWARD)),
            "code": comparable(client.score_groups(code_groups())),
        }


def _raylets() -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if b"raylet" in Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0]:
                    found.add(int(entry))
            except OSError:
                pass
    return found


def _restore(record: Path, recorded: str | None) -> None:
    if recorded is None:
        record.unlink(missing_ok=True)
    else:
        record.write_text(recorded)


@pytest.fixture(scope="module")
def cluster(reference):
    """Two nodes of one CPU; the head also holds the `probe_slot` the broken-sandbox test's replicas ask for."""
    before = _raylets()
    record = Path(os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp", "ray", "ray_current_cluster")
    recorded = record.read_text() if record.exists() else None
    local = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"probe_slot": 1}, "include_dashboard": False}
    )
    # Cluster records its head as `ray start` does: a plain ray.init() elsewhere on this machine (another test's
    # `groupscore serve --ray`) would join this cluster, and later its dead address. Every test here names it.
    _restore(record, recorded)
    local.add_node(num_cpus=1)
    ray.init(address=local.address, log_to_driver=False)
    try:
        yield local
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
            local.shutdown()
            _restore(record, recorded)
        deadline = time.monotonic() + 30
        while _raylets() - before and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _raylets() - before, "raylets left running after the cluster's shutdown"


@pytest.fixture(scope="module")
def url(cluster):
    """The deployment (2 replicas of one CPU, at most one a node) through Serve's proxy on a free port."""
    target = RayTarget(
        address=cluster.address,
        http_port=free_port(),
        num_replicas=2,
        num_cpus=1,
        max_replicas_per_node=1,
        settings={"debug": True, "deadline_s": 120},
    )
    with start_or_join(target) as base_url:
        yield base_url


def listener(port: int) -> str:
    """The command name of the process listening on a loopback TCP port (from /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if any(os.readlink(f"/proc/{entry}/fd/{fd}") in inodes for fd in os.listdir(f"/proc/{entry}/fd")):
                    return Path(f"/proc/{entry}/comm").read_text().strip()
            except OSError:
                pass
    return ""


def test_serves_http_comes_through_haproxy_by_default_straight_to_the_replicas(url):
    """The default ingress (README, bench/RESULTS.md "Ray Serve"): Serve's HAProxy mode, HAProxy holding the port, not
    Serve's Python proxy actor; the scoring endpoints answer through it."""
    from groupscore.service.ray_deploy import haproxy_binary

    assert haproxy_binary(), "ray[serve] bundles HAProxy on Linux"
    assert listener(int(url.rsplit(":", 1)[1])) == "haproxy"
    with ScoreClient(url) as client:
        verdicts = client.score_raw([{"verifier": "math", "completion": "\\boxed{4}", "answer": "4", "id": 0}])
    assert [v["status"] for v in verdicts] == ["correct"]


def replicas(handle, calls: int = 12) -> dict[str, dict]:
    seen: dict[str, dict] = {}
    for _ in range(calls):
        about = handle.whoami.remote().result(timeout_s=60)
        seen[about["replica"]] = about
    return seen


def test_replicas_spread_over_the_nodes_and_take_their_ray_cpus(url):
    about = replicas(ServeHandleClient().handle())
    assert len(about) == 2
    assert len({a["node_id"] for a in about.values()}) == 2  # one per node
    for replica in about.values():
        # one CPU from Ray: one scoring process, though the machine has more cores
        assert replica["cpus"] == 1.0 and replica["workers"] == 1 and len(replica["worker_pids"]) == 1
    assert (os.cpu_count() or 1) > 1


def test_http_and_handle_score_groups_as_the_single_process_service(url, reference):
    with ScoreClient(url) as client:
        assert comparable(client.score_groups(math_groups(), reward=REWARD)) == reference["math"]
        assert comparable(client.score_groups(code_groups())) == reference["code"]
    handle_client = ServeHandleClient(shards=2)
    before = {r: a["scored_items"] for r, a in replicas(handle_client.handle()).items()}
    for _ in range(2):
        assert comparable(handle_client.score_groups(math_groups(), reward=REWARD)) == reference["math"]
        assert comparable(handle_client.score_groups(code_groups() * 2)) == reference["code"] * 2
    after = {r: a["scored_items"] for r, a in replicas(handle_client.handle()).items()}
    both_scored = len(after) == 2 and all(after[r] > before.get(r, 0) for r in after)
    assert both_scored, (before, after)  # both replicas scored part of it
    # the reference itself is right: a composite's totals (the format component pays a third), a code group's rewards
    assert reference["math"][0]["total"]["rewards"] == [pytest.approx(2 / 3), 0.0, 1.0, 0.0]
    assert [v["reward"] for v in reference["code"][0]["results"]] == [1.0, 0.0, 0.5]


def slow_items(count: int) -> tuple[list[dict], list[float]]:
    """Math items whose scoring sleeps 0.4 s each (the debug hook), with the rewards they must get."""
    items, expected = [], []
    for index in range(count):
        right = index % 3 != 0
        answer = str(index)
        items.append(
            {
                "id": index,
                "verifier": "math",
                "completion": f"\\boxed{{{answer if right else index + 1}}}",
                "answer": answer,
                "metadata": {"debug_sleep_s": 0.4},
            }
        )
        expected.append(1.0 if right else 0.0)
    return items, expected


def kill_a_replica_while(score) -> tuple[list, str]:
    """Run `score()` in a thread, kill one replica's actor while it scores, and return the result."""
    box: dict = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", score()))
    worker.start()
    time.sleep(1.5)  # both replicas hold a shard of 8 items (3.2 s each) by now
    names = sorted(
        a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("SERVE_REPLICA::")
    )
    victim = next(n for n in names if "#GroupScore#" in n and n.startswith("SERVE_REPLICA::groupscore#"))
    ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=True)
    worker.join(240)
    assert "result" in box, "the batch did not come back"
    return box["result"], victim


def test_a_replica_killed_mid_batch_through_the_handle_loses_no_item(url):
    items, expected = slow_items(16)
    client = ServeHandleClient(shards=2)
    verdicts, victim = kill_a_replica_while(lambda: client.score_raw(items))
    assert [v["id"] for v in verdicts] == list(range(16))
    assert [v["reward"] for v in verdicts] == expected
    assert all(v["status"] in ("correct", "incorrect") for v in verdicts), verdicts
    assert victim.rsplit("#", 1)[1] not in replicas(client.handle(), calls=6)  # it is gone (a new one takes its place)


def test_a_replica_killed_mid_batch_through_http_loses_no_item(url):
    items, expected = slow_items(16)
    # The ingress's URL twice: two shards side by side, so both replicas hold part of the batch; the client's retry of
    # the shard whose replica died (HAProxy answers 5xx or drops the connection) goes to HAProxy again, which routes it
    # to a live one.
    with ScoreClient([url, url]) as client:
        verdicts, _ = kill_a_replica_while(lambda: client.score_raw(items))
    assert [v["id"] for v in verdicts] == list(range(16))
    assert [v["reward"] for v in verdicts] == expected


def test_a_replica_whose_sandbox_fails_readiness_is_not_routed_to(cluster, url):
    """A third node without a usable nsjail: of the two replicas that want a `probe_slot` (the head's and this node's),
    the broken node's fails its health check at start, and every request goes to the head's."""
    broken = cluster.add_node(
        num_cpus=1, resources={"probe_slot": 1}, env_vars={"GROUPSCORE_NSJAIL": "/nonexistent/nsjail"}
    )
    try:
        app = GroupScore.options(
            num_replicas=2,
            max_replicas_per_node=1,
            ray_actor_options={"num_cpus": 0, "resources": {"probe_slot": 1}},
        ).bind(settings={"deadline_s": 120})
        serve._run(app, name="probe", route_prefix="/probe", _blocking=False)  # it never runs whole: no waiting
        client = ServeHandleClient(app_name="probe", shards=2, timeout_s=120)
        groups = code_groups() * 3
        deadline = time.monotonic() + 180
        while True:  # the head's replica serves once it passed its first check
            try:
                scored = client.score_groups(groups)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        for _ in range(3):
            scored += client.score_groups(groups)
        with ScoreClient(f"{url}/probe") as http:
            scored += http.score_groups(groups)
        statuses = [v.status.value for group in scored for v in group.results]
        assert statuses.count("infra_error") == 0 and set(statuses) == {"correct", "incorrect", "partial"}, statuses
        about = replicas(client.handle(), calls=10)
        assert len(about) == 1 and next(iter(about.values()))["node_id"] == cluster.head_node.node_id
        deployment = serve.status().applications["probe"].deployments["GroupScore"]
        assert "sandbox" in deployment.message or "health" in deployment.message.lower(), deployment
    finally:
        serve.delete("probe")
        cluster.remove_node(broken)


def test_groupscore_serve_ray_deploys_the_serve_config_file_and_removes_it_on_interrupt(cluster, url, tmp_path):
    """`groupscore serve --ray ADDRESS --serve-config FILE`: the shipped config, as Serve's own schema reads it, with
    this cluster's proxy port, one replica of no reserved CPU and its own name and route."""
    import signal
    import subprocess
    import sys
    from importlib import resources

    import httpx
    import yaml

    config = yaml.safe_load(resources.files("groupscore.service").joinpath("serve.yaml").read_text())
    config["http_options"]["port"] = int(url.rsplit(":", 1)[1])
    app = config["applications"][0]
    app.update(name="from-cli", route_prefix="/cli")
    app["args"]["settings"] = {"deadline_s": 60}
    (deployment,) = app["deployments"]
    deployment.pop("autoscaling_config")
    deployment.update(num_replicas=1, ray_actor_options={"num_cpus": 0})
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "groupscore", "serve", "--ray", cluster.address, "--serve-config", str(path)]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while "serving on Ray Serve" not in log.read_text(errors="replace"):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        answer = httpx.post(
            f"{url}/cli/v1/score",
            json={"items": [{"verifier": "math", "completion": "\\boxed{2}", "answer": "2"}]},
            timeout=60,
        )
        assert answer.status_code == 200 and answer.json()["results"][0]["status"] == "correct", answer.text
        assert "from-cli" in serve.status().applications
        assert "Serve was running already: its own ingress" in log.read_text(errors="replace")  # the file's is moot
    finally:
        process.send_signal(signal.SIGINT)
        try:  # serve.delete waits for the replica to stop: a minute or more on a loaded 2-core CI machine
            process.wait(240)
        except subprocess.TimeoutExpired:
            process.kill()
            raise AssertionError(
                "serve --ray still deleting after 240 s:\n" + log.read_text(errors="replace")[-3000:]
            ) from None
    assert process.returncode == 0, log.read_text(errors="replace")[-3000:]
    assert "from-cli" not in serve.status().applications  # deleted on the way out; the other applications stay
    assert "groupscore" in serve.status().applications


def test_groupscore_serve_ray_refuses_workers():
    from helpers import groupscore

    done = groupscore("serve", "--ray", "--workers", "2", timeout=120)
    assert done.returncode == 2 and "--workers does not apply with --ray" in done.stderr, done.stderr


def test_the_trl_and_verl_adapters_reach_the_deployment_by_handle_and_by_proxy_url(url):
    import asyncio

    from groupscore.client.adapters import trl_reward_func
    from groupscore.client.verl import compute_score, compute_score_batch

    completions = ["\\boxed{4}", "\\boxed{5}", "no answer"]
    columns = {"answer": ["4", "4", "4"]}
    for service in ("serve://groupscore", url):
        assert trl_reward_func(service, verifier="math")(["q"] * 3, completions, **columns) == [1.0, 0.0, 0.0]
        reward_async = trl_reward_func(service, verifier="math", asynchronous=True)
        assert asyncio.run(reward_async(["q"] * 3, completions, **columns)) == [1.0, 0.0, 0.0]
        batch = compute_score_batch(["gsm8k"] * 3, completions, ["4"] * 3, url=service)
        assert [r["score"] for r in batch] == [1.0, 0.0, 0.0]
        assert compute_score("gsm8k", "\\boxed{4}", "4", url=service)["score"] == 1.0


def test_the_trainers_service_ray_deploys_for_the_run_or_joins_the_running_deployment(cluster, url):
    from pydantic import ValidationError

    from groupscore.train.config import ServiceConfig
    from groupscore.train.scoring import open_scorer, wire_group

    port = int(url.rsplit(":", 1)[1])
    groups = [wire_group("g", {"verifier": "math", "answer": "4"}, ["\\boxed{4}", "\\boxed{3}", "\\boxed{4}"])]
    own = {"address": cluster.address, "http_port": port, "app_name": "train-run", "route_prefix": "/train"}
    with open_scorer(ServiceConfig(ray={**own, "replica_cpus": 0})) as scorer:
        assert scorer.urls == [f"{url}/train"] and "train-run" in serve.status().applications
        (scored,) = scorer.score_groups(groups)
        assert scored.total.rewards == [1.0, 0.0, 1.0] and scored.total.advantages[1] < 0 < scored.total.advantages[0]
    assert "train-run" not in serve.status().applications  # deployed for the run, deleted after it
    with open_scorer(ServiceConfig(ray={"address": cluster.address, "http_port": port})) as scorer:
        assert scorer.urls == [url] and scorer.score_groups(groups)[0].total.rewards == [1.0, 0.0, 1.0]
    assert "groupscore" in serve.status().applications  # joined, so left running
    with pytest.raises(ValidationError, match="not both"):
        ServiceConfig(urls=[url], ray={})


def test_the_shipped_serve_config_is_one_serves_schema_takes_with_autoscaling_and_spread(tmp_path):
    from importlib import resources

    from groupscore.service.ray_deploy import load_config

    shipped = resources.files("groupscore.service").joinpath("serve.yaml")
    with resources.as_file(shipped) as path:
        config = load_config(path)
    (app,) = config.applications
    (deployment,) = app.deployments
    assert app.import_path == "groupscore.service.ray_app:build" and app.args["require_sandbox"] is True
    assert deployment.max_replicas_per_node == 1 and deployment.ray_actor_options.num_cpus == 8
    assert deployment.autoscaling_config["max_replicas"] >= deployment.autoscaling_config["min_replicas"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("applications: [{name: groupscore, import_path: 3, deployments: nope}]\n")
    with pytest.raises(ValueError, match="not a Serve config") as error:
        load_config(bad)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="cannot read the Serve config") as error:
        load_config(Path(__file__))  # not YAML at all
    assert "\n" not in str(error.value)


def test_the_ingress_is_haproxy_where_found_the_proxy_actor_on_request_or_without_a_binary(
    monkeypatch, capsys, tmp_path
):
    from groupscore.service.ray_deploy import HAPROXY_FLAG, PROXY_READY, controller_env, deploy_config, load_config

    ready = dict([PROXY_READY])
    monkeypatch.delenv(HAPROXY_FLAG, raising=False)
    monkeypatch.delenv(PROXY_READY[0], raising=False)
    monkeypatch.delenv("RAY_SERVE_HAPROXY_BINARY_PATH", raising=False)

    def flag(ingress: str | None) -> str:
        return controller_env(ingress)[HAPROXY_FLAG]

    assert flag(None) == flag("haproxy") == "1"  # the bundled binary
    assert controller_env("proxy") == {HAPROXY_FLAG: "0", **ready}
    monkeypatch.setenv(PROXY_READY[0], "12")  # the operator's readiness time-out reaches the controller
    assert controller_env("proxy") == {HAPROXY_FLAG: "0", PROXY_READY[0]: "12"}
    monkeypatch.delenv(PROXY_READY[0])
    monkeypatch.setenv(HAPROXY_FLAG, "0")  # the operator's word, unless asked otherwise
    assert flag(None) == "0" and flag("haproxy") == "1"
    monkeypatch.delenv(HAPROXY_FLAG)
    # HAProxy's stats and metrics ports: Serve's defaults, or free ones where another HAProxy holds them
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("", 8404))
            holder.listen()
        except OSError:
            pass  # held already (another Serve in HAProxy mode on this machine): the same case
        ports = controller_env("haproxy")
    assert ports["RAY_SERVE_HAPROXY_STATS_PORT"] != "8404" and int(ports["RAY_SERVE_HAPROXY_STATS_PORT"]) > 0
    assert "port 8404 is taken" in capsys.readouterr().err
    monkeypatch.setenv("RAY_SERVE_HAPROXY_BINARY_PATH", str(tmp_path / "no-haproxy"))  # no binary
    assert controller_env(None) == {HAPROXY_FLAG: "0", **ready}
    notice = capsys.readouterr().err
    assert "no HAProxy binary" in notice and "proxy actor" in notice and notice.count("\n") == 1
    with pytest.raises(ValueError, match="no HAProxy binary") as error:
        controller_env("haproxy")
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="ingress must be one of haproxy, proxy"):
        controller_env("nginx")
    from pydantic import ValidationError

    from groupscore.train.ray_service import RayServiceConfig

    assert RayServiceConfig(ingress="proxy").ingress == "proxy" and RayServiceConfig().ingress is None
    with pytest.raises(ValidationError, match="ingress"):
        RayServiceConfig(ingress="nginx")
    # the shipped config asks for HAProxy; without a binary, a one-line error before anything starts
    from importlib import resources

    with resources.as_file(resources.files("groupscore.service").joinpath("serve.yaml")) as path:
        config = load_config(path)
    assert config.controller_options.runtime_env["env_vars"] == {HAPROXY_FLAG: "1", **ready}
    with pytest.raises(ValueError, match="RAY_SERVE_ENABLE_HA_PROXY=1 but there is no HAProxy binary") as error:
        deploy_config(config)
    assert "\n" not in str(error.value)


def test_the_application_builder_refuses_unknown_args():
    from groupscore.service.ray_app import build

    with pytest.raises(ValueError, match="deployments section"):
        build({"num_replicas": 2})


def test_a_cluster_record_left_by_a_killed_cluster_is_passed_over_for_a_local_one(tmp_path, monkeypatch, capsys):
    """`ray.init()` joins the address the last `ray start` recorded; once that cluster is gone it waits on it for ever
    (CI saw `groupscore serve --ray` print GCS time-outs for 4 minutes). A dead record gives a local cluster."""
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "ray").mkdir()
    record = tmp_path / "ray" / "ray_current_cluster"
    assert default_address() is None  # no record: ray.init starts a local cluster by itself

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = closed.getsockname()[1]
    record.write_text(f"127.0.0.1:{dead}")
    assert default_address() == "local"
    assert f"127.0.0.1:{dead} does not answer" in capsys.readouterr().err

    with socket.socket() as alive:
        alive.bind(("127.0.0.1", 0))
        alive.listen()
        record.write_text(f"127.0.0.1:{alive.getsockname()[1]}")
        assert default_address() is None  # a live record is joined, as ray.init() does

    record.write_text(f"127.0.0.1:{dead}")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{dead}")
    assert default_address() is None  # the operator's address is ray.init's to use, dead or not
