"""A session's state between jails: packed at the episode's end (`pack`), restored in a checker's jail or at a task's
start (`safe_extract`), with only the links that resolve now, within the state (`confine_links`).

A checker is steered by nothing of the agent's but the contents of the state it judges: no member is written through a
symlink or outside the state's roots, and no link is carried that would resolve elsewhere later (through /proc, or to
something the test makes). The rest is carried whole: regular files, directories, symlinks, hard links and FIFOs, full
modes (but the owner's read, see OWNER_FILE) and times.
"""

import os

# Where a link of the state may lead besides the state's own roots: the read-only system tree, the same in the episode's
# jail and the checker's. Nothing else: /proc's links name processes (and their roots and working directories) that
# differ between the moment of the restore and the moment a checker's program follows them.
SYSTEM_RO = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt")
MAX_HOPS = 40  # symlinks followed in one path, as the kernel's limit
MAX_STEPS = 500_000  # path components walked to confine a whole state's links (seconds of the checker's CPU at most)
# Modes are restored whole (set-uid, set-gid and sticky bits included) but for the owner's read, and search on
# directories: a test in a container runs as root and reads what the agent left whatever its mode; here it runs as the
# state's owner, and a chmod 000 must not hide the state from it (docs/environments.md, "What a checker sees").
OWNER_FILE, OWNER_DIR = 0o400, 0o500


def inside(path, places):
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in places)


def resolves_within(path, allowed, budget=None):
    """Whether `path` resolves, link by link as the kernel would, to something that exists, every step of the way
    inside `allowed` (or on the way to it). A link through /proc, a link out of the state, a loop or a link to nothing
    does not. budget: [steps left], shared by the caller's calls; none left, nothing resolves."""
    import stat
    from collections import deque

    budget = budget if budget is not None else [MAX_STEPS]
    todo = deque(p for p in path.split("/") if p)
    done, hops = "/", 0
    while todo:
        budget[0] -= 1
        if budget[0] < 0:
            return False
        name = todo.popleft()
        if name == ".":
            continue
        if name == "..":
            done = os.path.dirname(done)
            continue
        step = os.path.join(done, name)
        if not inside(step, allowed) and not any(p.startswith(step + "/") for p in allowed):
            return False  # neither in an allowed place nor on the way to one (a work dir may lie deep)
        try:
            mode = os.lstat(step).st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode):
            hops += 1
            target = os.readlink(step)
            if hops > MAX_HOPS:
                return False
            todo.extendleft(reversed([p for p in target.split("/") if p]))
            done = "/" if target.startswith("/") else done
            continue
        if todo and not stat.S_ISDIR(mode):
            return False
        done = step
    return inside(done, allowed)  # the end itself in an allowed place, not on the way to one


def confine_links(roots):
    """Remove every symlink under `roots` that does not resolve, now and within the state or the read-only system
    tree, to something that exists (repeated: removing one can leave another pointing at nothing). A link that
    resolves only later, when a checker's program follows it, is never carried. All links together get MAX_STEPS
    steps of resolution: past them, the links left unresolved are removed too. The paths removed."""
    allowed = (*roots, *SYSTEM_RO)
    links = [
        os.path.join(top, name)
        for root in roots
        for top, dirs, files in os.walk(root)
        for name in dirs + files
        if os.path.islink(os.path.join(top, name))
    ]
    budget, removed = [MAX_STEPS], []
    while True:
        found = [path for path in links if not resolves_within(path, allowed, budget)]
        for path in found:
            os.unlink(path)
        removed += found
        if not found:
            return removed
        gone = set(found)
        links = [path for path in links if path not in gone]


def safe_extract(data, roots):
    """Unpack a tar of state dirs, whole: regular files, directories, symlinks, hard links and FIFOs, with their full
    modes (set-uid, set-gid and sticky bits too) and times. Only members under `roots`, none written through a
    symlink; links then confined (confine_links). The paths not carried (another type, outside, or a link removed)."""
    import io
    import tarfile

    skipped, dirs = [], []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar:
            path = os.path.normpath("/" + m.name)
            parent = os.path.dirname(path)
            if not inside(path, roots) or ".." in m.name.split("/") or os.path.realpath(parent) != parent:
                skipped.append(path)  # outside, or a symlink on the way: writing through it could leave the state
                continue
            os.makedirs(parent, exist_ok=True)
            if m.isdir():
                if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
                    skipped.append(path)
                    continue
                os.makedirs(path, exist_ok=True)
                os.chmod(path, 0o700 | m.mode & 0o777)  # its own mode once its contents are in (below)
                dirs.append((path, m))
                continue
            if os.path.lexists(path) and not (m.isfile() and os.path.isfile(path) and not os.path.islink(path)):
                skipped.append(path)
                continue
            if m.isfile():
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                try:
                    write_sparse(fd, tar.extractfile(m), m.size)
                    os.fchmod(fd, m.mode & 0o7777 | OWNER_FILE)  # after the data: a write clears set-uid and set-gid
                finally:
                    os.close(fd)
            elif m.issym():
                os.symlink(m.linkname, path)
            elif m.islnk():
                target = os.path.normpath("/" + m.linkname)
                if not inside(target, roots) or not os.path.isfile(target) or os.path.islink(target):
                    skipped.append(path)
                    continue
                os.link(target, path, follow_symlinks=False)
                continue  # its times and mode are its target's
            elif m.isfifo():
                os.mkfifo(path, m.mode & 0o777)
                os.chmod(path, m.mode & 0o7777)
            else:
                skipped.append(path)
                continue
            os.utime(path, (m.mtime, m.mtime), follow_symlinks=False)
    skipped += confine_links(roots)
    for path, m in reversed(dirs):  # deepest first: a directory's mode and time once nothing more is written in it
        os.chmod(path, m.mode & 0o7777 | OWNER_DIR)
        os.utime(path, (m.mtime, m.mtime))
    return skipped


def write_sparse(fd, src, size, chunk=1 << 20):
    """Copy `size` bytes of src to fd, leaving runs of zeros as holes (a sparse file the agent left takes no more
    room restored than it took in the episode)."""
    while src is not None:
        data = src.read(chunk)
        if not data:
            break
        if data.count(0) == len(data):
            os.lseek(fd, len(data), os.SEEK_CUR)
        else:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
    os.ftruncate(fd, size)


def survey(root):
    """Owner read (and search, on directories) on everything under root, so that a chmod 000 the agent left keeps
    nothing from the packing (no process of the episode is left to race); the modes as the agent left them, to pack,
    and what cannot be packed (sockets, devices)."""
    import stat

    modes, odd = {root: os.lstat(root).st_mode & 0o7777}, []
    os.chmod(root, modes[root] | 0o700)
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            mode = os.lstat(path).st_mode
            modes[path] = mode & 0o7777
            if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
                os.chmod(path, mode & 0o7777 | (0o700 if stat.S_ISDIR(mode) else 0o400))
            elif not (stat.S_ISLNK(mode) or stat.S_ISFIFO(mode)):
                odd.append(path)
    return modes, odd


def pack(roots, cap):
    """A tar of the state dirs (regular files, directories, symlinks, hard links, FIFOs, with the agent's modes and
    times), and the paths it could not hold."""
    import io
    import tarfile

    buf = io.BytesIO()
    total = [0]
    modes: dict[str, int] = {}
    odd: list[str] = []

    def keep(info):
        if not (info.isfile() or info.isdir() or info.issym() or info.islnk() or info.isfifo()):
            return None
        total[0] += info.size
        if total[0] > cap:
            raise OverflowError(f"the state is above {cap} bytes")
        info.mode = modes.get("/" + info.name, info.mode)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for root in roots:
            if os.path.isdir(root):
                found, unpackable = survey(root)
                modes.update(found)
                odd += unpackable
                tar.add(root, arcname=root.lstrip("/"), filter=keep)
    return buf.getbuffer(), odd  # a view, not a copy: the state may be a good part of the jail's memory
