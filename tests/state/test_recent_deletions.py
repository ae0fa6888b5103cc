"""The watches' memory of recent deletions (webhook/state/watch.py `RecentDeletions`): exactly the deletions of the
last `keep` seconds, each object at its latest deletion, however many came before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.state.watch import RecentDeletions


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.floats(0, 8, allow_nan=False)), max_size=200))
def test_it_holds_exactly_the_deletions_of_the_last_keep_seconds(steps: list[tuple[int, float]]) -> None:
    recent = RecentDeletions(keep=10.0)
    model: dict[tuple[str, str, str], float] = {}
    now = 0.0
    for name, gap in steps:
        now += gap
        key = ("Pod", "tenant", f"pod-{name}")
        recent.add(key, now)
        model[key] = now
        model = {k: t for k, t in model.items() if now - t <= 10.0}
        assert len(recent) == len(model)
        assert {k: recent.deleted_at(k) for k in model} == model


def test_a_namespace_deleted_at_once_is_forgotten_once_it_is_old() -> None:
    recent = RecentDeletions(keep=60.0)
    for i in range(20_000):
        recent.add(("Pod", "tenant", f"pod-{i}"), 100.0)
    recent.add(("Pod", "other", "late"), 161.0)
    assert len(recent) == 1 and recent.deleted_at(("Pod", "tenant", "pod-7")) == 0.0
