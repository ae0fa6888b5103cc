"""`review --live` and the live `audit` against an API server that does not play fair (testkit/fakeapi/hostile.py):
endless empty pages with a `continue` token, a body trickled a byte at a time faster than any socket read times
out, a page far larger than any page asked for. Each ends in exit 2 with an error naming the call, after a bounded
number of requests and bytes (webhook/state/bounded.py), never a hang, a traceback or the fail-open answer."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.fakeapi import FakeKubeAPI, running_fake_api
from testkit.fakeapi.hostile import endless_empty_pages, flood, trickle
from testkit.fakeapi.resources import Request
from tests.support import EXAMPLES, manifest_objects
from tests.webhook.commands import run_command
from webhook.state.bounded import MAX_BYTES

pytestmark = pytest.mark.e2e

#: A pod whose review lists the Nodes (does any node fit its nodeSelector?).
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"containers": [{"name": "web", "image": "nginx"}], "nodeSelector": {"kubernetes.io/hostname": "x"}},
}
#: Seconds each request may take; the trickle below gives each socket read a byte well within it.
TIMEOUT = "2"
#: The namespace whose policy ConfigMap `review --live` reads (none there: the embedded default).
LIVE = ("--namespace", "storage-affinity")
#: What the subprocess may take before the test calls it a hang.
HANG = 60


def nodes_listed(request: Request) -> bool:
    return request.path == "/api/v1/nodes"


def review(api: FakeKubeAPI, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps(POD))
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    args = ("review", "-f", str(pod), "--kubeconfig", str(kubeconfig), "--lookup-timeout", TIMEOUT, *LIVE)
    return run_command(*args, timeout=HANG)


def audit(api: FakeKubeAPI, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    return run_command(
        "audit",
        "--kubeconfig",
        str(kubeconfig),
        "--policy-namespace",
        "storage-affinity",
        "--lookup-timeout",
        TIMEOUT,
        "-o",
        "json",
        timeout=HANG,
    )


def failed(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with running_fake_api(*manifest_objects(EXAMPLES / "cluster.yaml")) as api:
        yield api


def test_review_stops_endless_empty_pages_at_its_page_bound(api: FakeKubeAPI, tmp_path: Path) -> None:
    with api.hostile(endless_empty_pages, nodes_listed):
        result = review(api, tmp_path)
    failed(result, "the Kubernetes API failed", "list nodes: ", "empty pages in a row")
    assert api.count("GET", "Node", name=False) == 9  # eight empty pages in a row are let through, not a ninth more


def test_review_gives_a_trickled_body_one_deadline_not_one_per_read(api: FakeKubeAPI, tmp_path: Path) -> None:
    with api.hostile(trickle(0.5), nodes_listed):
        result = review(api, tmp_path)
    failed(result, "list nodes: no complete answer within 2 s")


def test_review_refuses_a_page_larger_than_asked_for(api: FakeKubeAPI, tmp_path: Path) -> None:
    answer = flood(57)
    with api.hostile(answer, nodes_listed):
        result = review(api, tmp_path)
    failed(result, "list nodes: answer larger than 32 MiB")
    assert answer.sent < 57 << 20  # left unread past the cap (and what the sockets buffer)
    assert MAX_BYTES == 32 << 20


def test_a_get_is_bounded_as_a_list_is(api: FakeKubeAPI, tmp_path: Path) -> None:
    pod = {**POD, "spec": {**POD["spec"], "nodeName": "node-a"}}  # a named node is a GET of that node
    (tmp_path / "pod.json").write_text(json.dumps(pod))
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    with api.hostile(trickle(0.5), lambda r: r.path.startswith("/api/v1/nodes/")):
        result = run_command(
            "review",
            "-f",
            str(tmp_path / "pod.json"),
            "--kubeconfig",
            str(kubeconfig),
            "--lookup-timeout",
            TIMEOUT,
            *LIVE,
        )
    failed(result, "GET Node node-a: no complete answer within 2 s")


def test_audit_stops_endless_empty_pages(api: FakeKubeAPI, tmp_path: Path) -> None:
    with api.hostile(endless_empty_pages, nodes_listed):
        result = audit(api, tmp_path)
    failed(result, "list Nodes: 9 empty pages in a row")
    assert api.count("GET", "Node", name=False) == 9


def test_audit_gives_a_trickled_page_one_deadline(api: FakeKubeAPI, tmp_path: Path) -> None:
    with api.hostile(trickle(0.5), lambda r: r.path == "/api/v1/pods"):
        result = audit(api, tmp_path)
    failed(result, "list Pods: no complete answer within 2 s")


def test_audit_refuses_a_page_larger_than_asked_for(api: FakeKubeAPI, tmp_path: Path) -> None:
    answer = flood(57)
    with api.hostile(answer, nodes_listed):
        result = audit(api, tmp_path)
    failed(result, "list Nodes: answer larger than 32 MiB")
    assert answer.sent < 57 << 20
