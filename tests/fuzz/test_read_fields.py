"""What the fuzz can reach. `READ_FIELDS` (tests/fuzz/mutations.py) aims the structural fuzz at the fields the
webhook reads, but a mutation can only land on a field some seed holds: a name added there that neither the
strategies (tests/fuzz/strategies.py, the built seeds) nor the foreign fixtures and examples build is never
mutated. Likewise a cluster-state kind no strategy builds is never in a fuzzed cluster state. docs/development.md
says so in its recipes."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

from tests.fuzz import mutations as m
from tests.fuzz import strategies as s
from webhook.state.kinds import STATE_KINDS


def _keys(doc: Any) -> set[str]:
    return {part for path in m.paths(doc) for part in path if isinstance(part, str)}


def test_every_read_field_is_built_by_the_strategies_or_in_a_fixture() -> None:
    seen = set().union(*(_keys(review) for _, review in m.static_seeds()))
    seen |= set().union(*(_keys(review) for _, review, _ in m.built_pool()))

    def wanting(seed: tuple[str, Any, Any]) -> bool:
        """Collects what a built seed holds; true (ending the search) once every field is seen."""
        seen.update(_keys(seed[1]))
        return seen >= m.READ_FIELDS

    if not seen >= m.READ_FIELDS:  # beyond the fixed pool: what the strategies build in a longer run
        draws = settings(
            max_examples=150,
            derandomize=True,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        with contextlib.suppress(NoSuchExample):
            find(m.live_built_seeds(), wanting, settings=draws)
    never = sorted(m.READ_FIELDS - seen)
    assert not never, (
        f"READ_FIELDS names {never}, which no seed of the structural fuzz holds: build them in "
        "tests/fuzz/strategies.py (or add a foreign fixture that has them), or the fuzz never aims there"
    )


#: Cluster-state kinds no strategy builds yet, each with why: the fuzz never puts them in a cluster state.
NOT_FUZZED = {
    "ReferenceGrant": "a grant opens another namespace's source: covered by tests/data/disclosure/cases.yaml only"
}


def test_every_cluster_state_kind_is_in_a_fuzzed_cluster_state() -> None:
    """A kind added to webhook/state/kinds.py needs a builder in the strategies' cluster states (or a reason in
    NOT_FUZZED), else no fuzzed review ever reads it."""
    built = {str(obj.get("kind")) for _, _, state in m.built_pool() for obj in state}
    listed = {entry.kind for entry in STATE_KINDS}
    assert listed - built == set(NOT_FUZZED), "build the kind in tests/fuzz/strategies.py, or say why not here"


def test_the_structural_pool_holds_every_kind_of_seed() -> None:
    """The bounded run's pool draws every kind of built seed (every role, every data-source kind), however many
    kinds there are: a kind added to the strategies cannot drop out of a pool drawn at random."""
    kinds = [name for name, _, _ in m.built_pool()]
    assert set(kinds) == set(m.built_seed_kinds()), set(m.built_seed_kinds()) - set(kinds)
    assert {f"data source ({kind})" for kind in s.DATA_SOURCE_KINDS} <= set(kinds)
    assert {"mover", "backup", "restore", "cdi worker"} <= set(kinds)
    exposer = [state for name, _, state in m.built_pool() if name == "data source (exposer)"]
    assert exposer and all(any(obj["kind"] == "DataUpload" for obj in state) for state in exposer)
