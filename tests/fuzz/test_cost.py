"""The cost fuzzer: every shape the webhook reads, grown one dimension at a time within the review budget, must be
answered without a refusal (past the deadline, past the budget, a crashed rule), and doubling the dimension must at
most about double what the review costs.

Cost is counted, never timed (timings on a shared CI machine are not the property under test): the number of
function calls, Python and C, both webhooks make between the request body and the response, counted by a profile
hook (`testkit.costfuzz.Calls`). It is deterministic and cheap enough for every case (every object kind × base ×
dimension of testkit/costdims.py) in a few seconds. What it cannot see is work done inside one C call: a scan such
as `x in a_list` or `sorted()` of a long list is one call whatever its length. callgrind would count those
instructions too, but measured about 4 s of CPU per case under valgrind on the CI machine (a few hundred cases: half
an hour, against the minute the whole suite may take). So `make bench` runs the same cases natively at 1,000 and
5,000 nodes with sizes eight times larger and times them (`python -m bench.costfuzz`), where such a scan dominates
and shows in the ratio; the issue's crafted objects are timed on the real server by `python -m bench.cost`.
"""

from __future__ import annotations

from typing import Any

import pytest

from rules.kube import shapekit, shapes
from testkit import costfuzz
from testkit.costdims import DIMENSIONS, NOT_GROWN

#: "About doubles": the marginal cost at 2n over that at n. A linear cost gives 2.0 (at most 2.3 on every
#: case); a term quadratic in n as large as the linear one gives 3.
RATIO_LIMIT = 2.5


@pytest.mark.parametrize("case", costfuzz.cases(), ids=lambda case: case.id)
def test_doubling_a_dimension_at_most_about_doubles_the_cost(case: costfuzz.Case) -> None:
    # Fewer calls than items at n is a dimension the review does not walk item by item: at most one call an item
    # is the floor of its marginal cost (a constant handful more at 2n, a memo's eviction say, is no doubling).
    got = costfuzz.costs(case, case.dimension.size, costfuzz.counted, floor=case.dimension.size)
    assert got["refused"] is None, f"{case.id}: answered with a refusal: {got['refused']}"
    base, once, twice = got["costs"]
    assert got["ratio"] <= RATIO_LIMIT, (
        f"{case.id}: {twice - base:,} calls at {2 * case.dimension.size} against {once - base:,} at "
        f"{case.dimension.size} ({got['ratio']}×, over the base object's {base:,})"
    )


def test_a_dimension_grows_what_it_names() -> None:
    """Each dimension makes the object at 2n larger than at n (a grower that adds nothing proves nothing)."""
    for case in costfuzz.cases():
        n = case.dimension.size
        sizes = [len(costfuzz.body(costfuzz.build(case, size, "s")[0])) for size in (n, 2 * n)]
        state = [len(costfuzz.build(case, size, "s")[1]) for size in (n, 2 * n)]
        assert sizes[1] > sizes[0] or state[1] > state[0], case.id


def _paths(shape: Any, path: str = "") -> set[str]:
    """Every list and map field of a shape, as `a.b[].c`."""
    found: set[str] = set()
    if isinstance(shape, shapekit.obj):
        for key, inner in shape.by_name.items():
            found |= _paths(inner, f"{path}.{key}" if path else key)
    elif isinstance(shape, (shapekit.list_of, shapekit.map_of)):
        found.add(path)
        found |= _paths(shape.item, f"{path}[]")
    elif hasattr(shape, "inner"):  # the budgeted node affinity
        found |= _paths(shape.inner, path)
    elif type(shape).__name__ == "_Annotations":
        found.add(path)
    return found


TEMPLATE_PREFIXES = ("spec.template.", "spec.jobTemplate.spec.template.")


def test_every_list_and_map_the_rules_read_is_grown() -> None:
    """A list or map field of a reviewed kind (rules/kube/shapes.py) that no dimension grows, and that NOT_GROWN
    does not explain, fails here: a field a new rule reads joins the fuzzer with it."""
    grown = {path for dimension in DIMENSIONS for path in dimension.paths} | set(NOT_GROWN)
    missing, seen = set(), set()
    for kind in ("Pod", "Job", "Deployment", "StatefulSet", "CronJob", "ConfigMap"):
        for found in _paths(shapes.SHAPES[kind]):
            path = found
            for prefix in TEMPLATE_PREFIXES:
                path = path.removeprefix(prefix)
            seen.add(path)
            if not any(path == g or path.startswith(f"{g}[]") or path.startswith(f"{g}.") for g in grown):
                missing.add(f"{kind}: {path}")
    assert {"spec.volumes", "metadata.annotations", "spec.volumeClaimTemplates", "data"} <= seen  # the walk works
    assert not missing, sorted(missing)
