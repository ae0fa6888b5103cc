"""One replica, several gunicorn workers, each listing and watching for itself: the real server against the fake API.

Every worker of a replica must answer a review the same way: none takes a review before its state and policy are
loaded, a worker that starts while the policy ConfigMap is invalid applies what its siblings apply, and a replica
with no valid policy at all says so in /readyz and refuses reviews rather than apply the embedded default.

Each review goes on a new connection, so the kernel hands it to whichever worker accepts first.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from testkit.fakeapi import FakeKubeAPI, Request, running_fake_api
from testkit.reviews import admission_review
from testkit.server import Server, running_server
from tests.hardening.procs import children
from tests.state.conftest import eventually
from tests.state.objects import policy_map
from tests.support import EXAMPLES, load_yaml, manifest_objects
from tests.webhook.review_checks import patch_of

pytestmark = pytest.mark.e2e

NAMESPACE = "saw-system"  # what running_server passes as --namespace
SOURCE = f"ConfigMap {NAMESPACE}/storage-affinity-policy"
NODE_NAME = {"coScheduling": {"placement": "nodeName"}}
BROKEN = "enforcement: maybe\n"


def cluster() -> list[dict[str, Any]]:
    """examples/cluster.yaml: the mover's anchor pod db-0 holds its claim on a known node."""
    return manifest_objects(EXAMPLES / "cluster.yaml")


@contextmanager
def replica(tmp: Path, api: FakeKubeAPI, *args: str, wait_for: str = "/readyz") -> Iterator[Server]:
    kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")
    with running_server(tmp, "--kubeconfig", str(kubeconfig), *args, workers=2, wait_for=wait_for) as server:
        yield server


def workers(server: Server) -> set[int]:
    return children(server.process.pid)


def fresh(server: Server, method: str, path: str, body: Any = None) -> requests.Response:
    """One request on a connection of its own."""
    with server.session() as session:
        return session.request(method, server.url + path, json=body, headers={"Connection": "close"}, timeout=10)


def placement(server: Server) -> str:
    """How a mover review is answered: the placement its patch sets, or why it has none."""
    response = fresh(server, "POST", "/mutate", admission_review("CREATE", load_yaml(EXAMPLES / "mover-pod.yaml")))
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text.strip()}"
    answer = response.json()["response"]
    paths = {op["path"] for op in patch_of(answer)}
    if "/spec/nodeName" in paths:
        return "nodeName"
    if "/spec/affinity" in paths:
        return "requiredAffinity"
    return f"unpinned: {answer.get('warnings')}"


def readyz(server: Server) -> tuple[int, str]:
    response = fresh(server, "GET", "/readyz")
    return response.status_code, response.text


def pods_list(request: Request) -> bool:
    return request.method == "GET" and not request.watch and request.path == "/api/v1/pods"


def test_a_restarted_worker_takes_no_review_before_its_lists_have_loaded(tmp_path: Path) -> None:
    with running_fake_api(*cluster()) as api, replica(tmp_path, api) as server:
        eventually(lambda: api.watching("pods") == 2, timeout=20, what="both workers watching")
        assert placement(server) == "requiredAffinity"
        with api.holding(pods_list):  # the restarted worker's pod list takes as long as this block
            os.kill(min(workers(server)), signal.SIGKILL)
            eventually(lambda: api.held() == 1, timeout=20, what="the new worker listing pods")
            answers = [placement(server) for _ in range(24)]
            probes = [readyz(server) for _ in range(8)]
        assert answers == ["requiredAffinity"] * len(answers)
        assert [status for status, _ in probes] == [200] * len(probes), probes


def test_a_worker_started_while_the_policy_configmap_is_invalid_applies_its_replicas_policy(tmp_path: Path) -> None:
    with (
        running_fake_api(*cluster(), policy_map(NODE_NAME, namespace=NAMESPACE)) as api,
        replica(tmp_path, api) as server,
    ):
        eventually(lambda: api.watching("configmaps") == 2, timeout=20, what="both workers watching the policy")
        assert placement(server) == "nodeName"
        api.update(policy_map(BROKEN, namespace=NAMESPACE))
        eventually(
            lambda: all("last change refused" in readyz(server)[1] for _ in range(6)), what="both workers refused it"
        )
        before = workers(server)
        for pid in before:  # every worker now starts with the ConfigMap invalid
            os.kill(pid, signal.SIGKILL)
        eventually(lambda: len(workers(server) - before) == 2, timeout=20, what="two new workers")
        eventually(lambda: readyz(server)[0] == 200, timeout=20, what="ready again")

        answers = [placement(server) for _ in range(16)]
        probes = [readyz(server) for _ in range(6)]
    assert answers == ["nodeName"] * len(answers)
    for status, body in probes:
        assert status == 200
        assert f"[+] policy: ok ({SOURCE}); last change refused: {SOURCE} data[policy.yaml].enforcement" in body


def test_a_replica_with_no_valid_policy_is_not_ready_and_refuses_reviews(tmp_path: Path) -> None:
    with (
        running_fake_api(*cluster(), policy_map(BROKEN, namespace=NAMESPACE)) as api,
        replica(tmp_path, api, wait_for="/healthz") as server,
    ):
        eventually(lambda: api.watching("configmaps") == 2, timeout=20, what="both workers watching the policy")
        status, body = readyz(server)
        assert status == 503
        assert (
            f"[-] policy: no valid policy: {SOURCE} is invalid and this replica has had no valid policy from it; "
            f'refused: {SOURCE} data[policy.yaml].enforcement: "maybe" is not one of deny, warn\n'
        ) in body
        assert placement(server) == (
            f"HTTP 503: storage-affinity-webhook has no valid policy: {SOURCE} is invalid and this replica has had "
            "no valid policy from it"
        )

        api.update(policy_map(NODE_NAME, namespace=NAMESPACE))
        eventually(lambda: all(readyz(server)[0] == 200 for _ in range(6)), what="ready with the repaired policy")
        assert [placement(server) for _ in range(6)] == ["nodeName"] * 6


def test_a_worker_that_cannot_load_accepts_after_the_start_timeout_and_says_why(tmp_path: Path) -> None:
    lists = lambda request: request.method == "GET" and not request.watch  # noqa: E731
    with (
        running_fake_api(*cluster(), policy_map(NODE_NAME, namespace=NAMESPACE)) as api,
        api.holding(lists),  # an API server that never answers a list
        replica(tmp_path, api, "--start-timeout", "1", wait_for="/healthz") as server,
    ):
        status, body = readyz(server)
        assert status == 503
        assert f"[-] policy: no valid policy: {SOURCE} not read yet\n" in body
        assert "[-] pods: not synced (initial list pending)\n" in body
        assert placement(server) == f"HTTP 503: storage-affinity-webhook has no valid policy: {SOURCE} not read yet"
    assert "Accepting after the start timeout (1s), not loaded: policy: no valid policy" in server.log.read_text()
