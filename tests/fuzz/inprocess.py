"""The fuzzers' in-process webhook: the real Flask app under the fuzz policy, its view pointed at each example's
cluster state, with a log handler that catches any rule that logged a crash."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TypeVar

from rules.model import Json
from rules.policy import policy_from_document
from tests.fuzz import mutations as m
from tests.fuzz import strategies as s
from tests.fuzz.verdict import ErrorLog
from tests.support import app_client, view_from
from webhook.runtime import Runtime


class InProcessWebhook:
    def __init__(self) -> None:
        self.static_view = view_from(*m.cluster_state())
        policy = policy_from_document(m.fuzz_policy_document())
        self.runtime = Runtime(policy=policy, view=self.static_view, namespace=s.OWN_NAMESPACE)
        self.client = app_client(self.runtime)
        self.errors = ErrorLog()

    def use(self, state: tuple[Json, ...]) -> None:
        """Answer from `state` (the shared static view when it is the seeds' common cluster)."""
        self.runtime.view = self.static_view if state is m.cluster_state() else view_from(*state)


Hook = TypeVar("Hook", bound=InProcessWebhook)


def serving(hook: Hook) -> Iterator[Hook]:
    """A module fixture's body: the seed pool drawn first (hypothesis cannot draw it inside a test that is itself
    under @given), and the error log attached while the tests run."""
    m.built_pool()
    root = logging.getLogger()
    root.addHandler(hook.errors)
    try:
        yield hook
    finally:
        root.removeHandler(hook.errors)
