"""Shared checks of the planner's tiered ranking (imported by the planner and CLI tests)."""

from __future__ import annotations


def assert_tiered(seconds: list[float], tiers: list[int], tie_within: float) -> None:
    """A ranking in tiers: tier numbers start at 1 and never decrease; every step of a tier lies within
    ``tie_within`` of the tier's fastest; and a tier's fastest is slower than the previous tier's band."""
    assert seconds and tiers[0] == 1 and len(seconds) == len(tiers)
    assert all(b - a in (0, 1) for a, b in zip(tiers, tiers[1:]))
    previous_edge = 0.0
    for t in sorted(set(tiers)):
        steps = [s for s, k in zip(seconds, tiers) if k == t]
        fastest = min(steps)
        assert max(steps) <= fastest * (1 + tie_within) * (1 + 1e-9), (t, fastest, max(steps))
        assert fastest >= previous_edge * (1 - 1e-9), (t, fastest, previous_edge)
        previous_edge = fastest * (1 + tie_within)
