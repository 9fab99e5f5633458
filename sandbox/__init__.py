"""Isolated, timed, no-network code execution on nsjail. Imports nothing else of groupscore."""
