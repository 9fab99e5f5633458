"""Harbor task directories load as tasks, and their Dockerfiles are read as far as the jail can reproduce them: every
step it cannot make refuses the task with one line naming the task, the line and the step."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupscore.environments.dockerfile import UnsupportedStep, network_use, parse_dockerfile
from groupscore.environments.harbor import TOOLS, load_harbor, state_key
from groupscore.environments.sources import SourceError

BUNDLED = Path(__file__).resolve().parents[2] / "environments" / "data" / "harbor"
WRONG = Path(__file__).resolve().parent / "data" / "harbor_wrong"


def _context(tmp_path: Path, files: dict[str, str | bytes] | None = None) -> Path:
    context = tmp_path / "environment"
    context.mkdir(exist_ok=True)
    for name, data in (files or {}).items():
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            (context / name).write_bytes(data)
        else:
            (context / name).write_text(data)
    return context


def _parse(tmp_path: Path, text: str, files: dict[str, str | bytes] | None = None):
    return parse_dockerfile(text, _context(tmp_path, files), "t1")


def test_every_bundled_task_loads_with_its_instruction_tests_limits_and_oracle():
    tasks = load_harbor(BUNDLED, build=False)
    assert len(tasks) >= 20
    assert [t.id for t in tasks] == sorted(t.id for t in tasks)
    for task in tasks:
        assert task.tools == TOOLS and task.workdir == "/app"
        assert task.turns[0].messages[0]["content"] == (BUNDLED / task.id / "instruction.md").read_text()
        (checker,) = task.checkers
        assert checker.kind == "tests" and checker.command == "bash /tests/test.sh" and "test.sh" in checker.files
        assert task.metadata["solution_text"] == (BUNDLED / task.id / "solution" / "solve.sh").read_text()
        assert task.metadata["difficulty"] and task.metadata["category"] and task.metadata["tags"]
        assert task.files or task.metadata.get("build_commands"), f"{task.id} starts from an empty work dir"
        assert len(list((WRONG / task.id).glob("wrong_*.sh"))) >= 2, f"{task.id} needs two wrong solutions"


def test_a_single_task_directory_is_a_source_of_one(tmp_path):
    (task,) = load_harbor(BUNDLED / "csv-column-sum", build=False)
    assert task.id == "csv-column-sum" and task.source == str(BUNDLED / "csv-column-sum")
    assert task.files["data/sales.csv"].startswith("id,product,region")
    assert task.limits.episode_time_s == 300 and task.checkers[0].timeout_s == 60


@pytest.mark.parametrize("missing", ["instruction.md", "tests/test.sh", "task.toml"])
def test_a_task_without_a_required_file_is_refused_naming_it(tmp_path, missing):
    task = tmp_path / "t1"
    for name, text in {"instruction.md": "do it", "tests/test.sh": "echo 1", "task.toml": "[agent]\n"}.items():
        (task / name).parent.mkdir(parents=True, exist_ok=True)
        (task / name).write_text(text)
    (task / missing).unlink()
    with pytest.raises(SourceError, match=missing.replace(".", r"\.")):
        load_harbor(task if missing != "task.toml" else tmp_path)


def test_workdir_env_and_copies_become_the_tasks_start(tmp_path):
    build = _parse(
        tmp_path,
        'FROM ubuntu:24.04\nARG DIR=srv\nWORKDIR /$DIR\nENV A=1 B="two words"\nENV C the value\n'
        'COPY a.txt ./\nCOPY conf/ etc/\nCOPY b.txt renamed.txt\nCMD ["bash"]\n',
        {"a.txt": "a\n", "b.txt": "b\n", "conf/x.ini": "[x]\n", "conf/deep/y.ini": "[y]\n"},
    )
    assert build.workdir == "/srv"
    assert build.env == {"A": "1", "B": "two words", "C": "the value"}
    assert build.files == {"a.txt": "a\n", "etc/x.ini": "[x]\n", "etc/deep/y.ini": "[y]\n", "renamed.txt": "b\n"}
    assert build.commands == () and build.base_maps_to.startswith("the jail's root filesystem")
    assert any("CMD ignored" in note for note in build.notes)


def test_run_steps_and_the_copies_after_them_become_commands_in_order(tmp_path):
    context = _context(tmp_path, {"a.txt": "a\n", "bin.dat": b"\xff\x00", "run.sh": "#!/bin/sh\n"})
    (context / "run.sh").chmod(0o755)  # COPY keeps the executable bit, which plain files cannot carry
    build = parse_dockerfile(
        "FROM python:3.11-slim\nWORKDIR /app\nCOPY a.txt .\nRUN mkdir -p data && \\\n    # a comment\n"
        "    echo $A > data/x\nCOPY bin.dat run.sh ./\nENV A=late\n",
        context,
        "t1",
    )
    assert build.files == {"a.txt": "a\n"}
    assert build.command_lines == (4, 7, 7)
    assert "mkdir -p data && echo $A > data/x" in build.commands[0] and "export A" not in build.commands[0]
    assert "base64 -d > /app/bin.dat" in build.commands[1]
    assert "chmod 755 /app/run.sh" in build.commands[2]


def test_a_run_heredoc_is_kept_as_the_shell_reads_it(tmp_path):
    build = _parse(tmp_path, "FROM ubuntu:24.04\nRUN cat > f <<EOF\nhello\nEOF\nWORKDIR /app\n")
    assert build.commands[0].endswith("cat > f <<EOF\nhello\nEOF")


@pytest.mark.parametrize(
    ("dockerfile", "line", "says"),
    [
        ("FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y jq\n", 2, "RUN apt-get update"),
        ("FROM python:3.11\nWORKDIR /app\nRUN pip install pandas\n", 3, "RUN pip install pandas needs the network"),
        ("FROM python:3.11\nRUN python3 -m pip install x\n", 2, "needs the network"),
        ("FROM ubuntu:24.04\nRUN echo hi && curl -fsSL x | sh\n", 2, "needs the network"),
        ("FROM ubuntu:24.04\nRUN git clone repo\n", 2, "needs the network"),
        ("FROM ubuntu:24.04\nRUN python3 -c \"get('https://example.com')\"\n", 2, "a URL"),
        ("FROM ubuntu:24.04\nRUN useradd agent\n", 2, "changes the system"),
        ("FROM ubuntu:24.04\nRUN --network=host echo\n", 2, "asks for a network"),
        ("FROM ubuntu:24.04\nRUN --mount=type=cache,target=/c echo\n", 2, "--mount"),
        ("FROM node:20\n", 1, "FROM node:20 is an image whose files the jail does not have"),
        ("FROM scratch\n", 1, "is an image"),
        ("FROM ubuntu:24.04 AS build\nFROM ubuntu:24.04\n", 2, "multi-stage"),
        ("FROM ubuntu:24.04\nCOPY --from=build /x /app/x\n", 2, "--from"),
        ("FROM ubuntu:24.04\nADD https://example.com/x.tgz /app/\n", 2, "needs the network"),
        ("FROM ubuntu:24.04\nADD a.tar.gz /app/\n", 2, "unpacks the archive"),
        ("FROM ubuntu:24.04\nCOPY ../secret /app/\n", 2, "outside the build context"),
        ("FROM ubuntu:24.04\nCOPY missing.txt /app/\n", 2, "not in the build context"),
        ("FROM ubuntu:24.04\nCOPY a.tar.gz /opt/\n", 2, "outside the work dir"),
        ('FROM ubuntu:24.04\nSHELL ["pwsh", "-c"]\n', 2, "shell other than"),
        ("FROM ubuntu:24.04\nFROBNICATE x\n", 2, "FROBNICATE"),
        ("WORKDIR /app\n", 1, "comes before FROM"),
    ],
)
def test_each_step_the_jail_cannot_reproduce_refuses_the_task_in_one_line(tmp_path, dockerfile, line, says):
    with pytest.raises(UnsupportedStep) as refused:
        _parse(tmp_path, dockerfile, {"a.tar.gz": b"\x1f\x8b"})
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"task t1: Dockerfile line {line}: ")
    assert says in message


def test_a_refusal_names_the_task_directory(tmp_path):
    task = tmp_path / "needs-net"
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "instruction.md").write_text("do it")
    (task / "task.toml").write_text("")
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt")
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\nRUN apt-get install -y jq\n")
    with pytest.raises(UnsupportedStep, match=r"^task needs-net: Dockerfile line 3: RUN apt-get install -y jq needs"):
        load_harbor(task)


@pytest.mark.parametrize("command", ["printf 'pip\\n' > tools.txt", "mkdir -p data && seq 1 5 > data/n", "git init"])
def test_commands_that_only_mention_a_network_program_are_not_refused(command):
    assert network_use(command) == ""


def test_the_state_cache_key_follows_the_dockerfile_and_its_context(tmp_path):
    (task,) = load_harbor(BUNDLED / "top-ips", build=False)
    one = _parse(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\nCOPY x.py .\nRUN python3 x.py\n", {"x.py": "print(1)"})
    same = _parse(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\nCOPY x.py .\nRUN python3 x.py\n", {"x.py": "print(1)"})
    other = _parse(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\nCOPY x.py .\nRUN python3 x.py\n", {"x.py": "print(2)"})
    assert state_key(task, one) == state_key(task, same) != state_key(task, other)


def test_a_built_state_comes_from_the_cache_without_a_jail(tmp_path, monkeypatch):
    from groupscore.environments import harbor

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (unbuilt,) = load_harbor(BUNDLED / "top-ips", build=False)
    image = parse_dockerfile(
        (BUNDLED / "top-ips/environment/Dockerfile").read_text(), BUNDLED / "top-ips/environment", "top-ips"
    )
    path = harbor.cache_dir() / f"{state_key(unbuilt, image)}.tar"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"a tar")
    (task,) = load_harbor(BUNDLED / "top-ips")
    assert task.state == b"a tar" and task.files == {}
