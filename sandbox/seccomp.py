"""The jail's seccomp-bpf policy, as data, rendered to nsjail's kafel language.

Default allow; the listed syscalls fail with an errno (so programs see a clean error and tests can
pin the exact outcome) instead of killing the process.
"""

from __future__ import annotations

EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
AF_VSOCK = 40
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET: clone() may not make namespaces.
CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

DENIED_EPERM = (
    # mounts and namespaces
    "mount", "umount",  # kafel names x86-64 umount2 "umount"
    "pivot_root", "chroot", "unshare", "setns", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    # looking into or driving other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # kernel keyring
    "keyctl", "add_key", "request_key",
    # io_uring (bypasses seccomp for the ops it runs)
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # kernel attack surface no judged program needs
    "bpf", "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "acct", "swapon", "swapoff", "reboot", "syslog", "quotactl",
    "lookup_dcookie", "vhangup", "name_to_handle_at", "open_by_handle_at",
)
# clone3 passes flags in memory seccomp cannot read; ENOSYS makes libc fall back to clone(), which we can check.
DENIED_ENOSYS = ("clone3",)


def kafel_policy() -> str:
    return (
        "POLICY groupscore {\n"
        f"  ERRNO({EPERM}) {{ {', '.join(DENIED_EPERM)} }},\n"
        f"  ERRNO({EPERM}) {{ clone(flags) {{ (flags & {CLONE_NAMESPACE_FLAGS:#x}) != 0 }} }},\n"
        f"  ERRNO({EAFNOSUPPORT}) {{ socket(domain) {{ domain == {AF_VSOCK} }} }},\n"
        f"  ERRNO({ENOSYS}) {{ {', '.join(DENIED_ENOSYS)} }}\n"
        "}\n"
        "USE groupscore DEFAULT ALLOW"
    )
