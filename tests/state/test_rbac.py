"""The fake API allows only what the chart grants the server's ServiceAccount (rendered by helm), as a real API
server does: with the chart's rules the live state gets ready without one refused request; without the rule of
any one cluster-state kind it is refused (403) and never ready, as a pod in a cluster would never be."""

from __future__ import annotations

import time

import pytest

from rules.policy import Policy, policy_from_document
from testkit.fakeapi import FakeKubeAPI
from testkit.rbac import allowed, chart_grants, request_grant
from tests.state.conftest import Live, eventually
from webhook.state.kinds import STATE_KINDS, StateKind


def _naming_velero() -> Policy:
    """A policy that names Velero's namespace, so that every kind is read, DataUploads in that namespace too."""
    return policy_from_document({"nodeAgent": {"namespace": "velero"}})


def test_the_chart_rules_are_enough_to_get_ready(fake_api: FakeKubeAPI, live: Live) -> None:
    _, runtime = live(base=_naming_velero())
    # loaded(), not ready() alone: readiness says "ok (discovery pending)" before discovery answers, while a worker
    # takes no review until the optional groups discovered have been listed too
    eventually(lambda: runtime.loaded() and runtime.ready(), what="loaded and ready with what the chart grants")
    needed = [request_grant(r.method, r.path, r.query) for r in fake_api.requests]
    assert not [grant for grant in needed if grant is not None and not allowed(grant, chart_grants())]
    assert {(g.resource, g.verb) for g in needed if g is not None} >= {(e.plural, "list") for e in STATE_KINDS}


@pytest.mark.parametrize("entry", STATE_KINDS, ids=lambda e: e.kind)
def test_without_the_rule_of_a_kind_the_server_is_refused_and_never_ready(
    fake_api: FakeKubeAPI, live: Live, entry: StateKind
) -> None:
    grants = frozenset(
        grant for grant in chart_grants() if (grant.group, grant.resource) != (entry.group, entry.plural)
    )
    fake_api.grants = grants
    _, runtime = live(base=_naming_velero())
    refused = eventually(
        lambda: {name: detail for name, detail in runtime.readiness().items() if "403" in detail},
        what=f"a readiness check says the {entry.plural} list is refused",
    )
    check = _check_of(entry)
    assert list(refused) == [check], refused  # the check that reads the kind, and no other
    if entry.feature is not None:  # an optional group's check names which of its resources is refused
        assert [part.split(": ")[0] for part in refused[check].split("; ") if "403" in part] == [entry.plural]
    needed = [request_grant(r.method, r.path, r.query) for r in list(fake_api.requests)]
    assert {(g.group, g.resource) for g in needed if g is not None and not allowed(g, grants)} == {
        (entry.group, entry.plural)
    }
    time.sleep(0.5)  # retries, with backoff, are refused alike
    assert not runtime.ready()


def _check_of(entry: StateKind) -> str:
    """The readiness check that reports a kind's list: its optional group's, the policy ConfigMap's watch for a kind
    read by name (the one ConfigMap a policy naming no Velero ConfigMap makes it read), its own watch's else."""
    if entry.feature is not None:
        return entry.group
    return "policy-configmap" if entry.watched == "by-name" else entry.plural
