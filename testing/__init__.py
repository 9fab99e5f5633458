"""Consistency and reward-hacking checks for reward functions (pytest-friendly).

from groupscore.testing import check_reward_fn, assert_passes_checks, assert_handles, strategies
"""

from groupscore.testing.api import (
    assert_deterministic,
    assert_handles,
    assert_not_hackable,
    assert_passes_checks,
    assert_survives_edge_inputs,
    check_reward_fn,
)
from groupscore.testing.cases import Case, CasesError, load_cases
from groupscore.testing.check_base import CheckConfig
from groupscore.testing.report import CheckResult, CheckStatus, Report
from groupscore.testing.targets import (
    InfraError,
    ItemError,
    RewardFunctionTarget,
    ServiceTarget,
    Target,
    TargetError,
    VerifierTarget,
    VerlScoreTarget,
    as_target,
)

__all__ = [
    "Case",
    "CasesError",
    "CheckConfig",
    "CheckResult",
    "CheckStatus",
    "InfraError",
    "ItemError",
    "Report",
    "RewardFunctionTarget",
    "ServiceTarget",
    "Target",
    "TargetError",
    "VerifierTarget",
    "VerlScoreTarget",
    "as_target",
    "assert_deterministic",
    "assert_handles",
    "assert_not_hackable",
    "assert_passes_checks",
    "assert_survives_edge_inputs",
    "check_reward_fn",
    "load_cases",
]
