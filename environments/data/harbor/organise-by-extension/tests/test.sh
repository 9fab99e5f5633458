#!/bin/bash
# Partial credit: the share of files found where they belong (and with their content); 1 only when all are.
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import json, os
expected = {
    "pdf/report.PDF": "report.PDF", "txt/notes.txt": "notes.txt", "txt/todo.TXT": "todo.TXT",
    "jpg/photo.JPG": "photo.JPG", "jpg/photo2.jpg": "photo2.jpg", "gz/backup.tar.gz": "backup.tar.gz",
    "other/README": "README", "other/Makefile": "Makefile", "mp3/song.mp3": "song.mp3",
    "pdf/tax return 2023.pdf": "tax return 2023.pdf", "csv/data.v2.csv": "data.v2.csv", "old/keep.txt": "old/keep.txt",
}
root = "/app/downloads"
found = {}
for folder, _, files in os.walk(root):
    for name in files:
        path = os.path.join(folder, name)
        found[os.path.relpath(path, root)] = open(path, errors="replace").read()
right = sum(found.get(rel) == f"content of {orig}\n" for rel, orig in expected.items())
stray = len(set(found) - set(expected))
reward = right / len(expected) if not stray else min(right / len(expected), 0.5)
json.dump({"reward": round(reward, 4), "placed": right, "of": len(expected), "stray": stray},
          open("/logs/verifier/reward.json", "w"))
print(right, "of", len(expected), "placed;", stray, "stray files")
PY
