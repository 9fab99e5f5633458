"""The per-run host dir whose files are bound into the jail's work dir (by either launcher), and file-name rules."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.errors import BadRunRequest, SandboxUnavailable


@functools.lru_cache(maxsize=1)
def run_base() -> str:
    """Where per-run host dirs go: memory-backed if possible (fast to make and remove), and a place
    that allows exec (compiled programs run from there)."""
    for base in (sandbox_settings.current().tmp, "/dev/shm", tempfile.gettempdir(), "/var/tmp"):
        if not base or not os.path.isdir(base):
            continue
        st = os.statvfs(base)
        # A small /dev/shm (containers give 64 MB) would fill with collected files; skip it.
        if base == "/dev/shm" and st.f_bavail * st.f_frsize < (1 << 30):
            continue
        if not st.f_flag & os.ST_NOEXEC:
            return base
    raise SandboxUnavailable("no exec-able temp dir for per-run files (set GROUPSCORE_SANDBOX_TMP)")


NAME_MAX = 255  # bytes in one file name: a longer one fails the jail's mount, so it is refused up front


def check_name(name: str) -> str:
    p = PurePosixPath(name)
    if not name or p.is_absolute() or ".." in p.parts or name != str(p) or "\x00" in name:
        raise BadRunRequest(f"bad file name {name!r}: use a plain relative path inside the work dir")
    if any(len(part.encode("utf-8", errors="surrogatepass")) > NAME_MAX for part in p.parts):
        raise BadRunRequest(f"bad file name {name[:60]!r}...: each part of a path may have {NAME_MAX} bytes at most")
    return str(p)


class RunDir:
    """Per-run host dir: input files (bound read-only into the work dir), files to collect (bound
    read-write, pre-created and owned by the jail's uid), stdin, and the launcher's own files (nsjail's log).

    Only root and the jail's uid can reach it: as root the dir and the inputs belong to root with the
    jail's group (dir 0710, inputs 0640), so other local users cannot read programs or test inputs;
    unprivileged, the jail runs as our own uid and everything is 0700/0600."""

    def __init__(self, uid: int, gid: int, *, parent: str | None = None, owner: int = 0):
        """parent: where the dir goes (default: run_base()); owner: the host uid owning the dir (as root; the warm
        template's, whose runs bind the files themselves)."""
        self.path = Path(tempfile.mkdtemp(prefix="groupscore-run-", dir=parent or run_base()))
        self.as_root = os.geteuid() == 0
        self.uid, self.gid, self._n = uid, gid, 0
        if self.as_root:
            os.chown(self.path, owner, gid)
            os.chmod(self.path, 0o710)
        self.binds: list[tuple[str, str, bool]] = []  # (host file name in this dir, work-dir path, writable)
        self.collected: dict[str, Path] = {}

    def _new(self, content: bytes, mode: int, owner: tuple[int, int] | None = None) -> Path:
        self._n += 1
        host = self.path / f"f{self._n}"
        fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        if owner is not None:
            os.chown(host, *owner)
        os.chmod(host, mode)
        return host

    def add_input(self, name: str, content: bytes, *, executable: bool = False) -> None:
        if self.as_root:
            host = self._new(content, 0o750 if executable else 0o640, owner=(0, self.gid))
        else:
            host = self._new(content, 0o700 if executable else 0o600)
        self.binds.append((host.name, name, False))

    def add_collect(self, name: str) -> None:
        host = self._new(b"", 0o600, owner=(self.uid, self.gid) if self.as_root else None)
        self.binds.append((host.name, name, True))
        self.collected[name] = host

    def write(self, name: str, content: bytes | str) -> Path:
        """A harness-only file (config, stdin): 0600, never mounted into the jail."""
        p = self.path / name
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content.encode() if isinstance(content, str) else content)
        return p

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def read_collected(rundir: RunDir, cap: int) -> tuple[dict[str, bytes], list[str]]:
    files: dict[str, bytes] = {}
    truncated: list[str] = []
    for name, host in rundir.collected.items():
        try:
            with open(host, "rb") as fh:
                data = fh.read(cap + 1)
        except OSError:
            continue
        if len(data) > cap:
            data = data[:cap]
            truncated.append(name)
        files[name] = data
    return files, truncated
