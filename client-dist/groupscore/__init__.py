"""groupscore: a hardened reward and verifier toolkit for GRPO / RLVR training."""

__version__ = "0.1.0"
