"""Fixtures for live-state tests: a fake API over HTTP and a LiveClusterState wired to a Runtime, as serve does."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rules.policy import Policy, default_policy
from testkit.fakeapi import FakeKubeAPI, running_fake_api
from testkit.rbac import chart_grants
from webhook.policy.lastgood import ReplicaPolicy
from webhook.runtime import Runtime
from webhook.state.apisource import load_configuration
from webhook.state.live import LiveClusterState
from webhook.state.watch import LiveOptions

NAMESPACE = "webhook-system"


@pytest.fixture
def fake_api() -> Iterator[FakeKubeAPI]:
    """The API allowing what the chart grants the server's ServiceAccount, and nothing else."""
    with running_fake_api(grants=chart_grants()) as api:
        yield api


def fast_options(**overrides: Any) -> LiveOptions:
    """Timings for tests: quick retries, short watches."""
    values: dict[str, Any] = {
        "namespace": NAMESPACE,
        "lookup_timeout": 0.5,
        "connect_timeout": 0.5,
        "list_timeout": 2.0,
        "watch_timeout": 5,
        "backoff_base": 0.02,
        "backoff_cap": 0.1,
    }
    values.update(overrides)
    return LiveOptions(**values)


Live = Callable[..., tuple[LiveClusterState, Runtime]]


@pytest.fixture
def live(fake_api: FakeKubeAPI, tmp_path: Any) -> Iterator[Live]:
    """`live(**options)` → (state, runtime), started against `fake_api` through a kubeconfig; stopped after.

    Workers started with the same `replica` directory share the policy in effect, as a server's workers do."""
    started: list[LiveClusterState] = []

    def start(
        base: Policy | None = None, replica: Path | None = None, **overrides: Any
    ) -> tuple[LiveClusterState, Runtime]:
        configuration, _ = load_configuration(fake_api.write_kubeconfig(tmp_path / "kubeconfig"))
        state = LiveClusterState(configuration, fast_options(**overrides))
        policy = base or default_policy()
        runtime = Runtime(policy=policy, view=state, namespace=NAMESPACE, policy_source="embedded default")
        shared = ReplicaPolicy(replica) if replica is not None else None
        state.attach(runtime, base=(policy, "embedded default"), replica=shared)
        started.append(state.start())
        return state, runtime

    yield start
    for state in started:
        state.stop()


def eventually(check: Callable[[], Any], timeout: float = 5.0, what: str = "") -> Any:
    """Poll until `check()` is truthy (and return it) or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except AssertionError:
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            assert check(), f"not within {timeout}s: {what or check}"
        time.sleep(0.02)


def lease_holder(api: FakeKubeAPI, namespace: str, name: str) -> str:
    """Who holds the report writers' Lease in the fake API; "" while nobody does or it does not exist yet."""
    lease = api.get("Lease", namespace, name)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def report_writes(api: FakeKubeAPI, kind: str = "Report") -> int:
    """The requests that wrote policy reports of `kind` (creates, updates, deletes)."""
    return sum(api.count(method, kind) for method in ("POST", "PUT", "DELETE"))
