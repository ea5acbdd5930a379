"""How sure a finding is: the one place confidence is lowered (issue 23: one module per concept).

Confidence has three levels, high > medium > low. Analyzers start from a level their method
earns and lower it for what weakens the evidence, chiefly trace-quality checks that warn or fail.
"""

from __future__ import annotations

from collections.abc import Iterable

from tracelake.analyzers.contracts import Confidence

CONFIDENCE_ORDER: tuple[Confidence, ...] = ("high", "medium", "low")


def lowered(confidence: Confidence, steps: int = 1) -> Confidence:
    """`confidence` `steps` levels lower, never below low."""
    return CONFIDENCE_ORDER[min(CONFIDENCE_ORDER.index(confidence) + steps, len(CONFIDENCE_ORDER) - 1)]


def at_most(confidence: Confidence, cap: Confidence) -> Confidence:
    """The lower of `confidence` and `cap`."""
    return max(confidence, cap, key=CONFIDENCE_ORDER.index)


def confidence_from_quality(base: Confidence, verdicts: dict[str, str], checks: Iterable[str]) -> Confidence:
    """One level lower per relevant trace-quality check that warns; low when one fails."""
    checks = tuple(checks)
    if any(verdicts.get(c) == "fail" for c in checks):
        return "low"
    return lowered(base, sum(verdicts.get(c) == "warn" for c in checks))
