"""Hypothesis profiles for the fuzz suite: `ci` (default, bounded and reproducible) and `long` (a soak run).

Select with `HYPOTHESIS_PROFILE=long`; `HYPOTHESIS_MAX_EXAMPLES` overrides the example count of either.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

_COMMON = {
    "deadline": None,  # the 2-core CI machine's timing is not the property under test
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "print_blob": True,
}

# derandomize: the same examples on every run, so `make test` is reproducible; no database, so no state leaks
# between runs or machines. Explicit failures found by the long profile belong in tests/data tables instead.
settings.register_profile("ci", max_examples=25, derandomize=True, database=None, **_COMMON)
settings.register_profile(
    "long",
    max_examples=20_000,
    phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink],  # explain traces: too slow here
    **_COMMON,
)
_profile = os.environ.get("HYPOTHESIS_PROFILE", "ci")
_override = os.environ.get("HYPOTHESIS_MAX_EXAMPLES")
if _override:
    settings.register_profile(f"{_profile}-n", settings.get_profile(_profile), max_examples=int(_override))
    _profile = f"{_profile}-n"
settings.load_profile(_profile)
