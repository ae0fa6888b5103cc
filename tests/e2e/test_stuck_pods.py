"""Stuck storage pods counted by cause, end to end: the real server (gunicorn, two workers, TLS) lists and watches
the fake API, its in-server audit reads the index it keeps, and `/metrics` aggregates the auditing worker's counts.

The stuck pods are the cases of tests/data/audit/causes.yaml whose pods mount a claim (the only pods the index
keeps); once one of them runs and is Ready, its cause reads 0 again.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest
import yaml

from rules.causes import CODES
from testkit.fakeapi import running_fake_api
from testkit.server import Server, running_server
from tests.rules.test_causes import INDEXED_CAUSES, INDEXED_POLICY, cluster_of, indexed_cases, server_causes

pytestmark = pytest.mark.e2e

CASES = indexed_cases()
STUCK_METRIC = "storage_affinity_audit_stuck_pods"
#: The server's policy ConfigMap, in its namespace (testkit/server.py): the policy the indexed cases are audited by.
POLICY_CONFIG_MAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "storage-affinity-policy",
        "namespace": "saw-system",
        "labels": {"storage-affinity.io/policy": "true"},
    },
    "data": {"policy.yaml": yaml.safe_dump(INDEXED_POLICY)},
}


def cluster() -> list[dict[str, object]]:
    return [*cluster_of(CASES), POLICY_CONFIG_MAP]


def until(server: Server, expected: dict[str, float], deadline: float = 30.0) -> None:
    server.until_samples(STUCK_METRIC, "cause", expected, deadline)


def test_the_in_server_audit_counts_stuck_pods_by_cause(tmp_path: Path) -> None:
    assert {c["cause"] for c in CASES} == INDEXED_CAUSES
    expected = server_causes(CASES)
    with running_fake_api(*cluster()) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        with running_server(tmp_path, "--kubeconfig", str(kubeconfig), "--audit-interval", "0.5") as server:
            until(server, {code: float(expected[code]) for code in CODES})
            (multi_attach,) = [c["stuck"] for c in CASES if c["cause"] == "MultiAttach"]
            running = copy.deepcopy(multi_attach)
            running["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            api.update(running)
            expected["MultiAttach"] = 0
            until(server, {code: float(expected[code]) for code in CODES})


def test_the_first_in_server_audit_follows_the_first_sync(tmp_path: Path) -> None:
    """With the default five-minute interval, the audit metrics are real within seconds of readiness, not 0 for
    the first interval (the last-run timestamp is what the dashboard's "time since the last audit" reads)."""
    with running_fake_api(*cluster()) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        with running_server(tmp_path, "--kubeconfig", str(kubeconfig), "--audit-interval", "300") as server:
            ready = time.time()
            expected = server_causes(CASES)
            until(server, {code: float(expected[code]) for code in CODES}, deadline=10.0)
            (last_run,) = server.samples("storage_affinity_audit_last_run_timestamp_seconds").values()
            assert ready - 10 < last_run < ready + 10
