"""Verifiers: the item schema, the registry of kinds, and the kinds themselves (math, code, ...)."""

from groupscore.verifiers.registry import KINDS, Item, parse_item, score_item
from groupscore.verifiers.schema import ItemBase, Status, Verdict

__all__ = ["KINDS", "Item", "ItemBase", "Status", "Verdict", "parse_item", "score_item"]
