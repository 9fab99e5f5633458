"""The document a completion answers with: its last fenced block of a language, else last bare block, else all text."""

from __future__ import annotations

from groupscore.verifiers.code.extract import fenced_blocks


def find_fenced(text: str, language: str) -> str | None:
    """Body of the last block tagged `language`, else of the last untagged block, else None."""
    blocks = fenced_blocks(text)
    tagged = [b.code for b in blocks if b.tag == language]
    bare = [b.code for b in blocks if b.tag == ""]
    return (tagged or bare or [None])[-1]


def find_document(text: str, mode: str, language: str = "json") -> str | None:
    """The text to parse ("auto": fenced if any block, else the whole text), or None when the mode finds nothing."""
    if mode != "raw":
        fenced = find_fenced(text, language)
        if fenced is not None or mode == "fenced":
            return fenced
    return text if text.strip() else None
