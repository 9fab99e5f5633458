"""Killable worker processes: a call with a hard wall-clock bound and a memory cap (`run_bounded`, `WorkerPool`).

A leaf package (it imports nothing of groupscore): math's symbolic step bounds its sympy calls with it, and the scoring
runtime (`groupscore.runtime`) runs its batch workers on it.
"""
