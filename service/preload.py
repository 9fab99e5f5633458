"""Imported once by the scoring pool's fork server, so every worker forked from it starts with the scorers loaded."""

from groupscore.service.worker import load_scorers

load_scorers()
