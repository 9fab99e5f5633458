"""The code verifier: program extraction, test styles, and host-side comparison of sandboxed runs.

extract.py (program from completion) -> plan.py (tests as scored units; assertions.py converts asserts to calls,
host_eval.py evaluates them) -> sandbox_jobs.py (runs through groupscore.sandbox; jail_runner.py is what runs inside)
-> verify.py (judging, compare.py for stdout and JSON values, the verdict). item.py holds the item model.
"""
