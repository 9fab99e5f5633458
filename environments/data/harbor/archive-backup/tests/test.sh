#!/bin/bash
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import tarfile
expected = {"project/src/main.py": b'print("main")\n', "project/src/util.py": b"def f():\n    pass\n",
            "project/README.md": b"# Project\n", "project/docs/guide.txt": b"guide\n",
            "project/docs/catalog.txt": b"keep: a log-like name\n"}
ok = False
try:
    with tarfile.open("/app/backup.tar.gz", "r:gz") as tar:
        members = tar.getmembers()
        files = {m.name: tar.extractfile(m).read() for m in members if m.isfile()}
        names = [m.name for m in members]
    ok = files == expected and all(n == "project" or n.startswith("project/") for n in names) \
        and not any(n.startswith("project/cache/") for n in names)
    print(sorted(names))
except (OSError, tarfile.TarError) as exc:
    print("no archive:", exc)
import os
ok = ok and os.path.isfile("/app/project/logs/boot.log") and os.path.isfile("/app/project/cache/objs/a.o")
open("/logs/verifier/reward.txt", "w").write("1" if ok else "0")
PY
