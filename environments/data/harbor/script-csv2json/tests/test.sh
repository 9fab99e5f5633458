#!/bin/bash
# csv2json.py runs on CSV files it has never seen (fixed seeds); the JSON it prints is compared as data.
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import csv, io, json, random, re, subprocess

def convert(field):
    if field == "":
        return None
    if re.fullmatch(r"-?[0-9]+", field):
        return int(field)
    if "." in field:
        try:
            return float(field)
        except ValueError:
            pass
    return field

def case(seed):
    rng = random.Random(seed)
    header = rng.sample(["id", "name", "qty", "price", "note", "code", "delta"], rng.randint(2, 6))
    pool = ["", "0", "42", "-7", "007", "3.25", "-0.5", "1e5", "x.y", "a,b", 'say "hi"', "line\nbreak", " 5", "N/A",
            "1.2.3", "nan.", "+4", "12abc", "Ümlaut"]
    rows = [[rng.choice(pool) for _ in header] for _ in range(rng.randint(0, 12))]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header] + rows)
    return buf.getvalue(), [dict(zip(header, map(convert, row))) for row in rows]

passed = 0
cases = [case(s) for s in range(1, 11)]
for i, (text, expected) in enumerate(cases):
    try:
        proc = subprocess.run(["/usr/bin/python3", "/app/csv2json.py"], input=text, capture_output=True, text=True,
                              timeout=10)
        got = json.loads(proc.stdout)
        # key order matters too
        good = got == expected and all(list(g) == list(e) for g, e in zip(got, expected))
    except (subprocess.TimeoutExpired, ValueError):
        good = False
    passed += good
    print(f"case {i}: {'ok' if good else 'wrong'}")
open("/logs/verifier/reward.txt", "w").write("1" if passed == len(cases) else "0")
PY
