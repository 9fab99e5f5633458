#!/bin/bash
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import os
expected = {  # final name -> content (the original name)
    "2024-03-12_0001.jpg": "IMG_20240312_0001.jpg", "2024-03-12_0002.jpg": "IMG_20240312_0002.jpg",
    "2023-12-31_0417.jpg": "IMG_20231231_0417.jpg", "2024-07-04_0006.jpg": "IMG_20240704_0006.jpg",
    "IMG_20240101_0003.JPG": "IMG_20240101_0003.JPG", "IMG_2024031_0009.jpg": "IMG_2024031_0009.jpg",
    "img_20240101_0002.jpg": "img_20240101_0002.jpg", "IMG_20240229_0100.jpg.bak": "IMG_20240229_0100.jpg.bak",
    "holiday.jpg": "holiday.jpg", "IMG_20240704_0005 copy.jpg": "IMG_20240704_0005 copy.jpg",
}
try:
    names = sorted(os.listdir("/app/photos"))
    got = {n: open(f"/app/photos/{n}").read().strip() for n in names}
except OSError as exc:
    got = {"error": str(exc)}
ok = got == expected
if not ok:
    print("unexpected:", sorted(set(got.items()) ^ set(expected.items())))
open("/logs/verifier/reward.txt", "w").write("1" if ok else "0")
PY
