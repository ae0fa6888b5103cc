"""Storage pods that ended Failed, counted by cause end to end: the real server lists and watches the fake API, its
index keeps what says how a Failed pod ended, and its in-server audit names the cause the `audit` command names
(tests/data/audit/failed.yaml, with the table's times moved to now so that the default window holds them)."""

from __future__ import annotations

import copy
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from rules.causes import ENDED_CODES
from testkit.fakeapi import running_fake_api
from testkit.server import Server, running_server
from tests.rules.test_ended_causes import NOW, TABLE

pytestmark = pytest.mark.e2e

FAILED_METRIC = "storage_affinity_audit_failed_pods"
CASES = [c for c in TABLE["cases"] if c["cause"] and "policy" not in c]


def moved_to_now(obj: Any, by: float) -> Any:
    """`obj` with every timestamp `by` seconds later."""
    if isinstance(obj, dict):
        return {k: moved_to_now(v, by) for k, v in obj.items()}
    if isinstance(obj, list):
        return [moved_to_now(v, by) for v in obj]
    if isinstance(obj, str) and obj.startswith("2026-11-") and obj.endswith("Z"):
        when = datetime.fromisoformat(obj).timestamp() + by
        return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return obj


def until(server: Server, expected: dict[str, float], deadline: float = 30.0) -> None:
    server.until_samples(FAILED_METRIC, "cause", expected, deadline)


def test_the_in_server_audit_counts_ended_pods_by_cause_and_follows_a_pod_that_ends(tmp_path: Path) -> None:
    by = time.time() - NOW.timestamp()
    ended = [moved_to_now(copy.deepcopy(c["ended"]), by) for c in CASES]
    expected = Counter(c["cause"] for c in CASES)
    with running_fake_api(*copy.deepcopy(TABLE["base"]), *ended) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        with running_server(tmp_path, "--kubeconfig", str(kubeconfig), "--audit-interval", "0.5") as server:
            until(server, {code: float(expected[code]) for code in ENDED_CODES})
            # a running mover OOM-killed now: the watch brings its Failed status, the next audit counts it
            (oom,) = [e for e, c in zip(ended, CASES, strict=True) if c["cause"] == "OOMKilled"]
            again = copy.deepcopy(oom)
            again["metadata"]["name"] = "volsync-src-media-again"
            again["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            api.create(again)
            until(server, {code: float(expected[code]) for code in ENDED_CODES})
            again["status"] = copy.deepcopy(oom["status"])
            api.update(again)
            expected["OOMKilled"] += 1
            until(server, {code: float(expected[code]) for code in ENDED_CODES})
