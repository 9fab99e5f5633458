"""Imported by the template of the service's scoring workers: every worker forked from it starts with every kind's
scorer loaded (`groupscore score` preloads only the registry: a one-shot run imports a kind on its first item)."""

from groupscore.runtime.tasks import load_scorers

load_scorers()
