"""Consistency and reward-hacking checks for reward functions (pytest-friendly)."""
