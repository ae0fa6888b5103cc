"""API server faults against the real server over TLS in live mode: decisions follow `onLookupFailure`, no request
outlives its lookup budget, and the state recovers without a restart once the fault clears.

tests/state/test_live.py covers the state layer (LookupFailed texts, re-list after 410/cut, outage readiness);
these tests add what the API server sees: the admission answers, their time, and both gunicorn workers.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from testkit.fakeapi import FakeKubeAPI, Request, running_fake_api
from testkit.server import Server, running_server
from tests.hardening.answers import RecordProperty
from tests.hardening.hostile import encode, review
from tests.state.objects import node, pod, pv, pvc, storage_class
from tests.webhook.review_checks import check_response, patch_of

pytestmark = pytest.mark.e2e

LOOKUP_TIMEOUT = 0.5
BUDGET = LOOKUP_TIMEOUT + 2.0  # generous: speed is the benchmarks' business, this catches a hung request
_names = itertools.count()


def mover(claim: str) -> dict[str, Any]:
    obj = pod(f"mover-{next(_names)}", claim, phase="Pending")
    obj["metadata"]["labels"] = {"app.kubernetes.io/created-by": "volsync"}
    del obj["status"]
    return obj


def anchored(api: FakeKubeAPI, claim: str, node_name: str) -> None:
    """A bound RWO claim and a Running pod holding it on `node_name`, created through the API."""
    api.create(pvc(claim))
    api.create(pv(f"pv-{claim}"))
    api.create(pod(f"app-{claim}", claim, node=node_name))


def ask(session: requests.Session, server: Server, obj: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """One /mutate round trip, checked as the API server checks it; (response, seconds)."""
    sent = review(obj)
    started = time.perf_counter()
    answer = session.post(f"{server.url}/mutate", data=encode(sent), timeout=30)
    elapsed = time.perf_counter() - started
    assert answer.status_code == 200, answer.text
    check_response(sent, answer.json(), mutating=True)
    return answer.json()["response"], elapsed


def placed_on(response: dict[str, Any]) -> str | None:
    for op in patch_of(response):
        if op["path"].startswith("/metadata/annotations"):
            value = op["value"]
            text = value if isinstance(value, str) else value.get("storage-affinity.io/co-scheduled-with", "")
            return str(text).rpartition("/")[2] or None
    return None


@pytest.fixture(scope="module")
def api() -> Iterator[FakeKubeAPI]:
    seed = [node("n1"), node("n2"), storage_class("fast"), pvc("data"), pv("pv-data"), pod("db-0", node="n1")]
    with running_fake_api(*seed) as fake:
        yield fake


@pytest.fixture(scope="module", params=["allow", "deny"])
def live(
    request: pytest.FixtureRequest, api: FakeKubeAPI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp(f"faults-{request.param}")
    policy = tmp / "policy.yaml"
    policy.write_text(f"onLookupFailure: {request.param}\n")
    kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")
    args = ("--kubeconfig", str(kubeconfig), "--policy", str(policy), "--lookup-timeout", str(LOOKUP_TIMEOUT))
    with running_server(tmp, *args, workers=2) as server:
        server.policy = request.param  # type: ignore[attr-defined]
        yield server


def _named_pvc_get(r: Request) -> bool:
    return r.method == "GET" and not r.watch and "/persistentvolumeclaims/" in r.path


def _outage(api: FakeKubeAPI) -> None:
    api.stop()
    time.sleep(1.5)  # long enough for the watches to fail and back off


FAULTS: dict[str, Callable[[FakeKubeAPI], None]] = {
    "slow": lambda api: api.delay(LOOKUP_TIMEOUT * 4, _named_pvc_get),
    "500": lambda api: api.fail(500, _named_pvc_get),
    "403": lambda api: api.fail(403, _named_pvc_get),
    "429": lambda api: api.fail(429, _named_pvc_get),
    "unreachable": _outage,
}


#: How the lookup failure reads, after "GET PersistentVolumeClaim apps/<claim>".
FAULT_TEXT = {
    "slow": " failed within 0.5s: timed out",
    "500": ": the API server answered 500",
    "403": ": the API server answered 403",
    "429": ": the API server answered 429",
    "unreachable": " failed within 0.5s: cannot connect",
}


def _clear(api: FakeKubeAPI, fault: str) -> None:
    api.delay(None)
    api.fail(None)
    if fault == "unreachable":
        api.start()


def _recovers(api: FakeKubeAPI, server: Server, session: requests.Session, node_name: str) -> None:
    """A new anchor created through the API is seen, and movers are placed next to it: on `session`'s connection
    (one worker) and on fresh connections (whichever worker accepts them)."""
    claim = f"after-{next(_names)}"
    anchored(api, claim, node_name)
    deadline = time.monotonic() + 20  # reconnect backoff after an outage is at most a few seconds here
    while True:
        answers = [ask(session, server, mover(claim))[0]]
        for _ in range(6):
            with server.session() as fresh:
                answers.append(ask(fresh, server, mover(claim))[0])
        if all(placed_on(a) == node_name for a in answers):
            return
        assert time.monotonic() < deadline, f"no recovery: {answers}"
        time.sleep(0.2)


@pytest.mark.parametrize("fault", FAULTS)
def test_lookup_fault_follows_on_lookup_failure_within_budget(
    api: FakeKubeAPI, live: Server, fault: str, record_property: RecordProperty
) -> None:
    policy = live.policy  # type: ignore[attr-defined]
    times: list[float] = []
    with live.session() as session:
        _recovers(api, live, session, "n1")  # synced before the fault
        assert placed_on(ask(session, live, mover("data"))[0]) == "n1"  # and the claim below is in this worker's cache
        FAULTS[fault](api)
        try:
            for _ in range(4):  # a claim the cache has not seen: its PVC must be read from the API
                claim = f"unseen-{next(_names)}"
                response, elapsed = ask(session, live, mover(claim))
                times.append(elapsed)
                why = f"cluster state unavailable: GET PersistentVolumeClaim apps/{claim}{FAULT_TEXT[fault]}"
                if policy == "allow":
                    assert response["allowed"] is True and "patch" not in response
                    assert any(
                        w.startswith("storage-affinity-webhook admitted this unchanged") for w in response["warnings"]
                    )
                    assert response["auditAnnotations"]["lookup-failure"].startswith(why)
                else:
                    assert response["allowed"] is False
                    assert response["status"]["code"] == 503
                    assert response["status"]["message"].startswith(f"storage-affinity-webhook denied: {why}")
                    assert response["status"]["message"].endswith("(policy onLookupFailure: deny)")
                # what the cache already holds is still decided from it
                response, elapsed = ask(session, live, mover("data"))
                times.append(elapsed)
                assert placed_on(response) == "n1"
        finally:
            _clear(api, fault)
        _recovers(api, live, session, "n2")
    record_property("max_ms", round(max(times) * 1000, 1))
    record_property("requests", len(times))
    assert max(times) < BUDGET, times


def test_watch_streams_cut_again_and_again(api: FakeKubeAPI, live: Server, record_property: RecordProperty) -> None:
    times: list[float] = []
    with live.session() as session:
        for round_ in range(12):
            (api.expire_watches if round_ % 3 == 2 else api.break_watches)()
            response, elapsed = ask(session, live, mover("data"))
            times.append(elapsed)
            assert placed_on(response) == "n1"  # decisions keep coming from the last synced state
            time.sleep(0.05)
        _recovers(api, live, session, "n2")
    record_property("max_ms", round(max(times) * 1000, 1))
    assert max(times) < BUDGET, times
