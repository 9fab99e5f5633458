"""A real service on a free loopback port, for the demo, the trainer and tests: `with start_embedded() as url: ...`.

The server runs in a child process (`python -m groupscore serve`), so its scoring pool, signals and event loop are its
own; the context manager waits for /readyz and stops the server (and its workers) on exit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

import httpx


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextmanager
def start_embedded(
    port: int = 0,
    workers: int | None = None,
    token: str | None = None,
    env: dict[str, str] | None = None,
    ready_timeout_s: float = 120.0,
    task_dirs: list[str] | None = None,
) -> Iterator[str]:
    """Start `groupscore serve` on 127.0.0.1 (port 0: a free one) and yield its base URL once it is ready.

    `env` adds GROUPSCORE_* settings (e.g. {"GROUPSCORE_MAX_QUEUE_ITEMS": "64"}). Raises RuntimeError with the
    server's output if it exits or is not ready within `ready_timeout_s`. `task_dirs` are folders added to
    GROUPSCORE_TASK_DIRS for this server only (what /v1/sessions may open by path).
    """
    host = "127.0.0.1"
    port = port or free_port(host)
    command = [sys.executable, "-m", "groupscore", "serve", "--host", host, "--port", str(port)]
    if workers is not None:
        command += ["--workers", str(workers)]
    child_env = {**os.environ, **(env or {})}
    if token is not None:
        child_env["GROUPSCORE_TOKEN"] = token
    if task_dirs:
        from groupscore.service.settings import task_dirs_adding

        child_env["GROUPSCORE_TASK_DIRS"] = task_dirs_adding(task_dirs, to=(env or {}).get("GROUPSCORE_TASK_DIRS"))
    # The server's output goes to a file, not a pipe nobody reads (a full pipe would stall the server). Its own
    # process group: a terminal's Ctrl-C reaches only us, and we stop it in order (its scoring processes first); the
    # same session: being a child that does not lead a session, it ends itself if we die (cli/lifecycle.py).
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            command, env=child_env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, process_group=0
        )
        url = f"http://{host}:{port}"
        try:
            _wait_ready(process, url, ready_timeout_s, log)
            yield url
        finally:
            _stop(process)


def _tail(log: IO[bytes]) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-4000:]


def _wait_ready(process: subprocess.Popen[bytes], url: str, timeout_s: float, log: IO[bytes]) -> None:
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"groupscore serve exited with {process.returncode}:\n{_tail(log)}")
            try:
                if client.get(f"{url}/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise RuntimeError(f"groupscore serve at {url} not ready after {timeout_s:.0f} s:\n{_tail(log)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)  # uvicorn shuts down cleanly: lifespan closes the pool
        try:
            process.wait(timeout=15)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):  # stuck, or a second Ctrl-C: no more waiting
            try:
                os.killpg(process.pid, signal.SIGKILL)  # its own process group: the scoring processes go with it
            except ProcessLookupError:
                pass
            process.wait()
