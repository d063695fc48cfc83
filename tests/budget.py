"""How many examples a property test draws, scaled by the hypothesis profile of the run.

A property's `max_examples` is written for the standard budget of 100 examples per property (the
`ci` profile); the profile loaded for the run (tests/conftest.py, `--hypothesis-profile NAME` or
`HARNESSC_HYPOTHESIS_PROFILE`) scales every property alike: `harnessc`, the local default, draws
half as many; `thorough`, for releases, ten times as many.
"""

from __future__ import annotations

from hypothesis import settings

STANDARD = 100


def examples(n: int) -> int:
    """`n` examples at the standard budget, scaled to the loaded profile (at least 10)."""
    return max(10, n * settings().max_examples // STANDARD)
