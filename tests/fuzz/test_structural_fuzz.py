"""Structural-mutation fuzzing of /mutate and /validate through the real Flask app in-process.

Seeds are real reviews (the foreign fixtures, the examples, what the schema-valid strategies build); each example
breaks one to four paths of one (tests/fuzz/mutations.py) and sends it to both endpoints. Every answer must be
one tests/fuzz/verdict.py accepts, and no rule may have logged a crash. `make test` runs a fixed, derandomized
set (the `ci` profile); `make fuzz` runs the long profile.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.model import Json
from tests.fuzz import mutations as m
from tests.fuzz.inprocess import InProcessWebhook, serving
from tests.fuzz.profiles import examples
from tests.fuzz.verdict import FuzzFailure, judge
from webhook.app.endpoints import DEFAULT_MAX_BODY


@dataclass(frozen=True)
class Case:
    seed: str
    review: Json
    state: tuple[Json, ...]
    ensure_ascii: bool

    def body(self) -> bytes:
        return m.encode(self.review, ensure_ascii=self.ensure_ascii)


@st.composite
def cases(draw: st.DrawFn, seeds: st.SearchStrategy[tuple[str, Json, tuple[Json, ...]]]) -> Case:
    name, review, state = draw(seeds)
    return Case(name, draw(m.mutated(review)), state, draw(st.booleans()))


class Webhook(InProcessWebhook):
    """One in-process app under the fuzz policy; each example points its view at the seed's cluster state."""

    def check(self, case: Case) -> None:
        """Both endpoints; raises FuzzFailure naming the endpoint and what went wrong."""
        self.use(case.state)
        body = case.body()
        for endpoint in ("mutate", "validate"):
            answer = self.client.post(f"/{endpoint}", data=body, content_type="application/json")
            failure: FuzzFailure | None = None
            try:
                judge(
                    body, endpoint, answer.status_code, answer.content_type, answer.get_data(), max_body=self.max_body
                )
            except FuzzFailure as exc:
                failure = exc
            logged = self.errors.take()
            if failure is not None or logged is not None:
                kind = failure.kind if failure is not None else "logged at ERROR"
                raise FuzzFailure(kind, f"/{endpoint} ({case.seed}): {failure or ''} {logged or ''}")

    max_body = DEFAULT_MAX_BODY


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    yield from serving(Webhook())


@settings(max_examples=examples(800))
@given(case=cases(m.static_seed_cases()))
def test_mutated_fixtures_and_examples_get_a_sound_answer(webhook: Webhook, case: Case) -> None:
    webhook.check(case)


@settings(max_examples=examples(800))
@given(case=cases(m.built_seeds()))
def test_mutated_built_reviews_get_a_sound_answer(webhook: Webhook, case: Case) -> None:
    webhook.check(case)


def test_the_seeds_are_answered_soundly_unmutated(webhook: Webhook) -> None:
    """The harness judges real reviews sound: a failure of the fuzz is the mutation's, not the seed's."""
    for name, review in m.static_seeds():
        webhook.check(Case(name, review, m.cluster_state(), True))
    for name, review, state in m.built_pool():
        webhook.check(Case(name, review, state, True))
