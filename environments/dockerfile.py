"""The Dockerfile subset a Harbor task's `environment/` may use, read into steps the session jail can reproduce.

There is no container runtime: the image is the jail's own root filesystem (`FROM` names a base in `BASE_IMAGES`),
its writable places are the task's work dir and /tmp, and it has no network. So `WORKDIR`, `ENV`, `ARG`, `COPY`/`ADD`
from the build context and `RUN` steps that need no network are honoured; a step the jail cannot reproduce refuses the
task with one line naming the task, the Dockerfile line and the step (`UnsupportedStep`); instructions that only
describe how a container is started (`CMD`, `EXPOSE`, ...) are ignored with a note.

What the parse gives (`Build`): text files placed before any step (a task's `files`) and shell commands, in order, for
the rest (`RUN` steps, and the copies that plain text files cannot carry: bytes, modes, copies after a `RUN`).
"""

from __future__ import annotations

import base64
import fnmatch
import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from groupscore.environments.errors import SourceError

JAIL_ROOT = "the jail's root filesystem (host /usr, read-only)"
# FROM: the images whose files the jail's root provides (what a task's steps and tests may call). Nothing else is
# pretended: an image that brings programs of its own (node, gcc toolchains, databases) is refused.
BASE_IMAGES: tuple[tuple[str, str], ...] = (
    ("ubuntu:*", f"{JAIL_ROOT}: bash, coreutils, grep, sed, awk, tar, gzip, python3"),
    ("debian:*", f"{JAIL_ROOT}: bash, coreutils, grep, sed, awk, tar, gzip, python3"),
    ("python:3.*", f"{JAIL_ROOT}: its python3 is the host's (3.11, standard library only)"),
    ("bash:*", f"{JAIL_ROOT}: bash and the host's utilities"),
)
# Instructions that describe how a container starts or is labelled; the state a session starts from is unchanged.
IGNORED = {"CMD", "ENTRYPOINT", "EXPOSE", "LABEL", "MAINTAINER", "STOPSIGNAL", "HEALTHCHECK", "VOLUME", "ONBUILD"}
# Programs that fetch from the network (package managers, downloaders, remote version control).
NETWORK_PROGRAMS = {
    "apt-get", "apt", "aptitude", "apk", "yum", "dnf", "microdnf", "zypper", "pacman", "brew", "snap", "conda",
    "mamba", "micromamba", "pip", "pip3", "pipx", "uv", "poetry", "pdm", "npm", "npx", "yarn", "pnpm", "bun", "gem",
    "bundle", "cargo", "rustup", "go", "composer", "curl", "wget", "aria2c", "ssh", "scp", "sftp", "rsync", "nc",
    "add-apt-repository", "docker", "huggingface-cli",
}  # fmt: skip
# Programs that change the system outside the work dir (users, services, locales): nothing the jail can keep.
SYSTEM_PROGRAMS = {"useradd", "adduser", "groupadd", "usermod", "chsh", "systemctl", "service", "locale-gen",
                   "update-alternatives", "ldconfig", "dpkg", "rpm", "mount"}  # fmt: skip
REMOTE_GIT = {"clone", "fetch", "pull", "push", "ls-remote", "submodule"}
WRAPPERS = {"sudo", "env", "exec", "time", "nohup", "nice", "command", "xargs"}
ARCHIVE = re.compile(r"\.(tar|tar\.gz|tgz|tar\.bz2|tbz2?|tar\.xz|txz)$")
URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)
NETWORK_URL = re.compile(r"\b(?:https?|ftps?|git|ssh|rsync|s3)://", re.I)
HEREDOC = re.compile(r"<<(-?)\s*([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")


class UnsupportedStep(SourceError):
    """A Dockerfile step the jail cannot reproduce: one line naming the task, the line and the step."""


@dataclass(frozen=True)
class Build:
    """What a Dockerfile leaves to a session: where it starts, its environment, and how its state is made."""

    base: str
    base_maps_to: str
    workdir: str
    env: dict[str, str]
    files: dict[str, str]  # text files, relative to `workdir`, in place before the first command
    commands: tuple[str, ...] = ()  # shell steps, in order, each self-contained (its directory and environment)
    command_lines: tuple[int, ...] = ()  # the Dockerfile line of each command
    notes: tuple[str, ...] = ()  # what was ignored, a line each


@dataclass
class _Parse:
    task_id: str
    context: Path
    line: int = 0
    step: str = ""
    base: str | None = None
    base_maps_to: str = ""
    workdir: str = "/app"
    workdirs: list[str] = field(default_factory=lambda: ["/app"])
    env: dict[str, str] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)
    shell_prelude: str = ""
    copies: list[tuple[int, str, bytes, int | None]] = field(default_factory=list)  # line, dest, data, chmod
    runs: list[tuple[int, str, str, dict[str, str]]] = field(default_factory=list)  # line, cwd, command, env
    order: list[tuple[str, int]] = field(default_factory=list)  # ("copy"|"run", index)
    notes: list[str] = field(default_factory=list)

    def refuse(self, why: str) -> UnsupportedStep:
        step = self.step if len(self.step) <= 80 else self.step[:77] + "..."
        return UnsupportedStep(f"task {self.task_id}: Dockerfile line {self.line}: {step} {why}")


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, instruction) with continuations joined, comments dropped and heredoc bodies attached."""
    lines = text.splitlines()
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        start, parts = i + 1, list[str]()
        while i < len(lines):
            raw = lines[i]
            i += 1
            if raw.strip().startswith("#") or (parts and not raw.strip()):
                continue  # comments (and, as Docker does, blank lines) inside a continuation are dropped
            if raw.rstrip().endswith("\\"):
                parts.append(raw.rstrip()[:-1])
                continue
            parts.append(raw)
            break
        joined = " ".join(p.strip() for p in parts).strip()
        if not joined:
            continue
        for strip_tabs, _, word in HEREDOC.findall(joined):
            body = []
            while i < len(lines) and (lines[i].strip() if strip_tabs else lines[i]) != word:
                body.append(lines[i].lstrip("\t") if strip_tabs else lines[i])
                i += 1
            i += 1
            joined += "\n" + "\n".join(body) + "\n" + word
        out.append((start, joined))
    return out


def substitute(text: str, values: dict[str, str]) -> str:
    """$NAME, ${NAME}, ${NAME:-default} and ${NAME:+alt}, as Docker expands them in WORKDIR, ENV, COPY and FROM."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        op, arg = m.group(3), m.group(4) or ""
        value = values.get(name, "")
        if op == ":-":
            return value or arg
        if op == ":+":
            return arg if value else ""
        return value

    return re.sub(r"\$(?:([A-Za-z_]\w*)|\{([A-Za-z_]\w*)(?:(:[-+])([^}]*))?\})", one, text)


def _words(rest: str) -> list[str]:
    if rest.startswith("["):
        try:
            words = json.loads(rest)
        except ValueError:
            words = None
        if isinstance(words, list) and all(isinstance(w, str) for w in words):
            return words
    return shlex.split(rest)


def _flags(p: _Parse, rest: str, allowed: set[str]) -> tuple[dict[str, str], str]:
    flags: dict[str, str] = {}
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        name, _, value = flag[2:].partition("=")
        if name not in allowed:
            raise p.refuse(f"uses --{name}, which the jail cannot reproduce")
        flags[name] = value
        rest = rest.lstrip()
    return flags, rest


def parse_dockerfile(text: str, context: Path, task_id: str) -> Build:
    """Read a Dockerfile whose build context is `context`; raises UnsupportedStep for a step the jail cannot make."""
    p = _Parse(task_id=task_id, context=context.resolve())
    for p.line, instruction in logical_lines(text):
        p.step = instruction.splitlines()[0]
        keyword, _, rest = instruction.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if p.base is None and keyword not in ("FROM", "ARG"):
            raise p.refuse("comes before FROM")
        handler = HANDLERS.get(keyword)
        if handler is not None:
            handler(p, rest)
        elif keyword in IGNORED:
            p.notes.append(f"line {p.line}: {keyword} ignored (it describes how a container starts, not its files)")
        else:
            raise p.refuse(f"is an instruction the jail cannot reproduce ({keyword})")
    if p.base is None:
        raise UnsupportedStep(f"task {task_id}: the Dockerfile has no FROM")
    return _assemble(p)


def _from(p: _Parse, rest: str) -> None:
    if p.base is not None:
        raise p.refuse("starts another stage: a multi-stage build needs another image's files")
    _, rest = _flags(p, rest, {"platform"})
    image = substitute(rest.split()[0], p.args) if rest else ""
    name = re.sub(r"^(docker\.io/)?(library/)?", "", image.split("@")[0])
    name = name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"
    for pattern, maps_to in BASE_IMAGES:
        if fnmatch.fnmatchcase(name, pattern):
            p.base, p.base_maps_to = image, maps_to
            return
    known = ", ".join(pattern for pattern, _ in BASE_IMAGES)
    raise p.refuse(f"is an image whose files the jail does not have (bases it maps: {known})")


def _arg(p: _Parse, rest: str) -> None:
    for word in shlex.split(rest):
        name, eq, default = word.partition("=")
        p.args.setdefault(name, substitute(default, {**p.args, **p.env}) if eq else "")


def _env(p: _Parse, rest: str) -> None:
    values = {**p.args, **p.env}
    first = rest.split(None, 1)[0] if rest else ""
    if "=" in first:
        for word in shlex.split(rest):
            name, eq, value = word.partition("=")
            if not eq:
                raise p.refuse("mixes the ENV forms (KEY=VALUE and KEY VALUE)")
            p.env[name] = substitute(value, values)
    else:
        name, _, value = rest.partition(" ")
        if not name or not value.strip():
            raise p.refuse("sets no value")
        p.env[name] = substitute(" ".join(shlex.split(value)), values)


def _workdir(p: _Parse, rest: str) -> None:
    path = substitute(" ".join(_words(rest)), {**p.args, **p.env})
    p.workdir = posixpath.normpath(posixpath.join(p.workdir, path))
    p.workdirs.append(p.workdir)


def _shell(p: _Parse, rest: str) -> None:
    words = _words(rest)
    if words[:1] in (["/bin/bash"], ["bash"], ["/bin/sh"], ["sh"]) and words[-1:] == ["-c"]:
        options = [w for w in words[1:-1]]
        p.shell_prelude = f"set {' '.join(options)}\n" if options else ""  # e.g. -o pipefail, -e, -x
        return
    raise p.refuse("sets a shell other than sh or bash")


def _user(p: _Parse, rest: str) -> None:
    p.notes.append(f"line {p.line}: USER {rest} ignored (a session's jail has one user, who owns the work dir)")


def _run(p: _Parse, rest: str) -> None:
    flags, rest = _flags(p, rest, {"network"})
    if flags.get("network", "none") != "none":
        raise p.refuse("asks for a network; the jail has none")
    if rest.startswith("["):
        command = shlex.join(_words(rest))
    elif rest.startswith("<<"):
        # RUN <<EOF: the heredoc's body is the script; a shebang names its interpreter.
        body = rest.split("\n", 1)[1].rsplit("\n", 1)[0] if "\n" in rest else ""
        interpreter = body.split("\n", 1)[0][2:].strip() if body.startswith("#!") else ""
        command = f"{interpreter} - <<'GS_RUN_EOF'\n{body}\nGS_RUN_EOF" if interpreter else body
    else:
        command = rest
    why = network_use(command)
    if why:
        raise UnsupportedStep(f"task {p.task_id}: Dockerfile line {p.line}: {_short('RUN ' + command)} {why}")
    p.order.append(("run", len(p.runs)))
    p.runs.append((p.line, p.workdir, p.shell_prelude + command, {**p.args, **p.env}))


def _short(step: str) -> str:
    step = step.splitlines()[0]
    return step if len(step) <= 80 else step[:77] + "..."


def network_use(command: str) -> str:
    """Why a shell command cannot run in the jail ("" if it can): it fetches, or changes the system."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = command.split()
    at_start = True
    for i, token in enumerate(tokens):
        if NETWORK_URL.search(token):
            return "reads the network (a URL); the jail cannot reproduce it"
        if token and set(token) <= set("&|;()\n"):
            at_start = True
            continue
        if not at_start:
            continue
        if re.match(r"^[A-Za-z_]\w*=", token) or token in WRAPPERS or token.startswith("-"):
            continue  # VAR=x cmd, sudo cmd, env -i cmd: the program is further on
        at_start = False
        program = posixpath.basename(token)
        following = tokens[i + 1 : i + 3]
        if program in NETWORK_PROGRAMS or (program.startswith("python") and following == ["-m", "pip"]):
            return "needs the network; the jail cannot reproduce it"
        if program == "git" and any(t in REMOTE_GIT for t in tokens[i + 1 : i + 4]):
            return "needs the network; the jail cannot reproduce it"
        if program in SYSTEM_PROGRAMS:
            return "changes the system outside the work dir; the jail cannot reproduce it"
    return ""


def _copy(p: _Parse, rest: str, add: bool = False) -> None:
    flags, rest = _flags(p, rest, {"chown", "chmod", "link"})
    if "chown" in flags:
        p.notes.append(f"line {p.line}: --chown ignored (a session's jail has one user)")
    if "\n" in rest:
        raise p.refuse("copies from a heredoc, which the loader does not read")
    words = [substitute(w, {**p.args, **p.env}) for w in _words(rest)]
    if len(words) < 2:
        raise p.refuse("names no source and destination")
    *sources, dest = words
    chmod = int(flags["chmod"], 8) if flags.get("chmod", "").isdigit() else None
    if flags.get("chmod") and chmod is None:
        raise p.refuse("gives --chmod a mode other than octal digits")
    dest_abs = posixpath.normpath(posixpath.join(p.workdir, dest))
    known_dirs = set(p.workdirs) | {posixpath.dirname(d) for _, d, _, _ in p.copies}
    into_dir = dest.endswith("/") or dest in (".", "./") or len(sources) > 1 or dest_abs in known_dirs
    for source in sources:
        if URL.match(source):
            raise p.refuse("fetches a URL: it needs the network; the jail cannot reproduce it")
        for path in _matches(p, source):
            if add and ARCHIVE.search(path.name):
                raise p.refuse(f"unpacks the archive {path.name}, which the loader does not do (COPY it, then RUN tar)")
            if path.is_dir():
                for inner in sorted(q for q in path.rglob("*") if q.is_file()):
                    if not inner.resolve().is_relative_to(p.context):
                        raise p.refuse(f"copies {inner.relative_to(p.context)}, which leads outside the build context")
                    _add_copy(p, posixpath.join(dest_abs, inner.relative_to(path).as_posix()), inner, chmod)
            else:
                _add_copy(p, posixpath.join(dest_abs, path.name) if into_dir else dest_abs, path, chmod)


def _add(p: _Parse, rest: str) -> None:
    _copy(p, rest, add=True)


def _matches(p: _Parse, source: str) -> list[Path]:
    pattern = posixpath.normpath(source.lstrip("/"))
    if pattern == ".." or pattern.startswith("../"):
        raise p.refuse(f"copies {source}, outside the build context (environment/)")
    found = sorted(p.context.glob(pattern)) if pattern != "." else [p.context]
    for path in found:
        if not path.resolve().is_relative_to(p.context):
            raise p.refuse(f"copies {source}, which leads outside the build context (environment/)")
    if not found:
        raise p.refuse(f"copies {source}, which is not in the build context (environment/)")
    return found


def _add_copy(p: _Parse, dest: str, path: Path, chmod: int | None) -> None:
    mode = chmod if chmod is not None else (0o755 if path.stat().st_mode & 0o111 else None)
    p.order.append(("copy", len(p.copies)))
    p.copies.append((p.line, dest, path.read_bytes(), mode))


def _assemble(p: _Parse) -> Build:
    """Text copies before the first RUN become files; everything from there on, in order, becomes commands."""
    workdir = p.workdir
    if workdir in ("/", "/tmp") or not workdir.startswith("/"):
        raise UnsupportedStep(f"task {p.task_id}: the Dockerfile's WORKDIR {workdir} is no work dir of its own")
    files: dict[str, str] = {}
    commands: list[str] = []
    lines: list[int] = []
    for kind, index in p.order:
        if kind == "run":
            line, cwd, command, env = p.runs[index]
            if not (_inside(cwd, workdir) or _inside(cwd, "/tmp")):
                raise UnsupportedStep(f"task {p.task_id}: Dockerfile line {line}: RUN in {cwd}, outside {workdir}")
            exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
            commands.append(f"{exports}mkdir -p {shlex.quote(cwd)} && cd {shlex.quote(cwd)} || exit 1\n{command}")
            lines.append(line)
            continue
        line, dest, data, mode = p.copies[index]
        if not (_inside(dest, workdir) or _inside(dest, "/tmp")) or dest in (workdir, "/tmp"):
            raise UnsupportedStep(
                f"task {p.task_id}: Dockerfile line {line}: COPY to {dest}, outside the work dir {workdir} "
                "and /tmp (the jail's only writable places)"
            )
        text = _text(data)
        if not commands and mode is None and text is not None and _inside(dest, workdir):
            files[posixpath.relpath(dest, workdir)] = text
            continue
        encoded = base64.encodebytes(data).decode()
        chmod = f" && chmod {mode:o} {shlex.quote(dest)}" if mode is not None else ""
        commands.append(
            f"mkdir -p {shlex.quote(posixpath.dirname(dest))} && base64 -d > {shlex.quote(dest)} <<'GS_COPY_EOF'"
            f"{chmod}\n{encoded}GS_COPY_EOF"
        )
        lines.append(line)
    made = {posixpath.dirname(posixpath.join(workdir, f)) for f in files}
    for extra in p.workdirs[1:]:
        # A WORKDIR creates its folder even when nothing lands in it.
        if extra != workdir and _inside(extra, workdir) and not any(_inside(m, extra) for m in made):
            commands.append(f"mkdir -p {shlex.quote(extra)}")
            lines.append(0)
    return Build(
        base=p.base or "",
        base_maps_to=p.base_maps_to,
        workdir=workdir,
        env=dict(p.env),
        files=files,
        commands=tuple(commands),
        command_lines=tuple(lines),
        notes=tuple(p.notes),
    )


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


HANDLERS = {"FROM": _from, "ARG": _arg, "ENV": _env, "WORKDIR": _workdir, "SHELL": _shell, "USER": _user,
            "RUN": _run, "COPY": _copy, "ADD": _add}  # fmt: skip
