"""The review deadline on the real server (gunicorn, one gevent worker, TLS), with testkit/slowrule.py's rule, which
runs until the deadline stops it for a pod so labelled: both webhooks answer the refusal naming the deadline, and the
in-server audit reports a stored such pod once, then skips it. Latencies are measured by `bench/deadline.py`, not
here."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator

import pytest

from testkit import slowrule
from testkit.reviews import admission_review
from testkit.server import Server, running_server
from tests.support import EXAMPLES, load_yaml, manifest_objects

NAMED = "past the review deadline: the rules spent 100 ms of CPU time on it"


def spinning(name: str) -> dict[str, object]:
    pod = copy.deepcopy(load_yaml(EXAMPLES / "stuck-mover-pod.yaml"))
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"][slowrule.SPIN_LABEL] = slowrule.FOREVER
    assert isinstance(pod, dict)
    return pod


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("deadline")
    cluster = tmp / "cluster.json"
    objects = [*manifest_objects(EXAMPLES / "cluster.yaml"), spinning("stored")]
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    args = ("--cluster", str(cluster), "--audit-interval", "1")
    with running_server(tmp, *args, workers=1, program="testkit.slowrule") as srv:
        yield srv


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_a_review_past_the_deadline_is_refused_naming_it(server: Server, endpoint: str) -> None:
    with server.session() as session:
        review = admission_review("CREATE", spinning("fresh"))
        answer = session.post(f"{server.url}/{endpoint}", json=review, timeout=30).json()["response"]
        assert session.get(f"{server.url}/healthz", timeout=30).status_code == 200
    assert answer["allowed"] is False
    assert "patch" not in answer
    assert NAMED in answer["status"]["message"]
    assert answer["auditAnnotations"] == {"past-deadline": NAMED}


def test_the_audit_reports_a_stored_pod_past_the_deadline_once(server: Server) -> None:
    def runs() -> int:
        return server.log.read_text().count("webhook.audit.loop: audit: ")

    ends = time.monotonic() + 30
    while runs() < 3 and time.monotonic() < ends:
        time.sleep(0.2)
    log = server.log.read_text()
    assert runs() >= 3, log[-2000:]
    refusals = [line for line in log.splitlines() if "not audited again until it changes" in line]
    assert len(refusals) == 1, refusals
    assert "Pod shop/stored" in refusals[0] and f"not audited: {NAMED}" in refusals[0]
