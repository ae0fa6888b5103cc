"""Hypothesis profiles for the fuzz suite: `ci` (default, bounded and reproducible) and `long` (a soak run).

Select with `HYPOTHESIS_PROFILE=long`; `HYPOTHESIS_MAX_EXAMPLES` overrides the example count of either.
"""

from __future__ import annotations

import os
from typing import TypeVar

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

T = TypeVar("T")

# deadline off: the 2-core CI machine's timing is not the property under test. derandomize and no database in
# `ci`: the same examples on every run, so `make test` is reproducible and no state leaks between machines; what
# the long profile finds goes into the tests/data tables as a named case instead.
_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile(
    "ci", max_examples=25, derandomize=True, database=None, deadline=None, suppress_health_check=_SLOW, print_blob=True
)
settings.register_profile(
    "long",
    max_examples=20_000,
    phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink],  # no explain phase: its tracing is slow
    deadline=None,
    suppress_health_check=_SLOW,
    print_blob=True,
)
_profile = os.environ.get("HYPOTHESIS_PROFILE", "ci")
_override = os.environ.get("HYPOTHESIS_MAX_EXAMPLES")
#: The default run of `make test`: fixed examples, no count given. Tests whose examples are cheap run more there.
BOUNDED = _profile == "ci" and not _override
if _override:
    settings.register_profile(f"{_profile}-n", settings.get_profile(_profile), max_examples=int(_override))
    _profile = f"{_profile}-n"
settings.load_profile(_profile)


def examples(bounded: int) -> int:
    """`bounded` examples in the default run; the profile's count when a longer or a given one was asked for."""
    return bounded if BOUNDED else settings().max_examples


def fixed_draws(strategy: st.SearchStrategy[T], count: int) -> list[T]:
    """`count` examples of `strategy`, the same on every run and machine (derandomized, no database, no shrinking).
    Hypothesis tries the simplest example first (every choice its minimum: no optional field, the first of every
    list of names), so it is drawn and left out: a pool of two would otherwise be half that one example.
    Call it outside any test under @given: hypothesis does not nest."""
    drawn: list[T] = []

    @settings(
        max_examples=count + 1,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: T) -> None:
        drawn.append(example)

    collect()
    return drawn[1:]
