"""Every request the real server sends to the API is one tests/data/rbac/server-calls.yaml lists, so the chart,
which grants exactly that list (tests/chart/test_chart_rbac.py), grants what the server needs: live state, the
policy ConfigMap and the Velero ConfigMap it names, a lookup that misses, the Lease, the policy reports and the
Events. The
fake API enforces the chart's rules, as a real API server does: without one of them the server is never ready."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from rules.reports import REPORT_NAME
from testkit.fakeapi import running_fake_api
from testkit.rbac import chart_grants
from testkit.server import running_server
from tests.e2e.test_report_leader import ARGS, NAMESPACE, cluster
from tests.e2e.test_server import mover_review
from tests.rbac_calls import ANY, Grant, allowed, expected_grants, request_grant
from tests.state.conftest import eventually
from tests.state.objects import policy_map, velero_map

pytestmark = pytest.mark.e2e

VELERO = ("velero", "node-agent-config")
POLICY = {"loadAffinitySource": {"configMap": {"namespace": VELERO[0], "name": VELERO[1]}}}


def test_the_server_calls_only_what_the_list_says(tmp_path: Path) -> None:
    objects = [*cluster(), policy_map(POLICY, namespace=NAMESPACE), velero_map({"loadAffinity": []})]
    with running_fake_api(*objects, grants=chart_grants()) as api:
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        with running_server(tmp_path, "--kubeconfig", kubeconfig, *ARGS, env={"POD_NAME": "server-a"}) as server:
            review = mover_review("rbac-miss")
            for volume in review["request"]["object"]["spec"]["volumes"]:
                if "persistentVolumeClaim" in volume:
                    volume["persistentVolumeClaim"]["claimName"] = "not-in-the-index"  # a GET on the miss
            with server.session() as session:
                for body in (mover_review("rbac"), review):
                    assert session.post(f"{server.url}/mutate", json=copy.deepcopy(body), timeout=10).ok
            eventually(lambda: api.get("Report", "shop", REPORT_NAME), 15, "the server writes the shop report")
            series = eventually(
                lambda: [e for e in api.objects("Event") if (e.get("series") or {}).get("count", 0) >= 2], 15,
                "the server records an Event on the stuck mover and updates its series",
            )  # fmt: skip
            assert {e["reportingInstance"] for e in series} == {"server-a"}  # the replica's pod name
        requests = list(api.requests)

    grants = expected_grants(
        {"velero", "datamover", "reports", "openreports", "wgpolicyk8s", "events", "lease"},
        {"release": NAMESPACE, "velero": VELERO[0], "datamover": VELERO[0]},
        {
            "policy-configmap": ["storage-affinity-policy"],
            "velero-configmap": [VELERO[1]],
            "lease": ["storage-affinity-webhook"],  # the server's default --lease-name
            "report": [REPORT_NAME],
        },
    )
    needed = [(request, request_grant(request.method, request.path, request.query)) for request in requests]
    refused = [
        f"{r.method} {r.path} {r.query}" for r, grant in needed if grant is not None and not allowed(grant, grants)
    ]
    assert not refused, f"requests the list does not allow: {refused}"
    made = {grant for _, grant in needed if grant is not None}
    # The ConfigMaps are read by name only, and what the test set out to cause happened.
    assert Grant("", "configmaps", "watch", NAMESPACE, "storage-affinity-policy") in made
    assert Grant("", "configmaps", "watch", VELERO[0], VELERO[1]) in made
    namespace = review["request"]["object"]["metadata"]["namespace"]
    assert Grant("", "persistentvolumeclaims", "get", namespace, "not-in-the-index") in made
    assert not [g for g in made if g.resource == "configmaps" and ANY in (g.namespace, g.name)]
    assert Grant("velero.io", "datauploads", "watch", VELERO[0], ANY) in made  # in Velero's namespace alone
    assert {g.verb for g in made if g.group == "openreports.io"} >= {"list", "create"}
    assert {g.verb for g in made if g.group == "events.k8s.io"} == {"create", "patch"}


def test_without_one_chart_rule_the_server_is_refused_and_not_ready(tmp_path: Path) -> None:
    nodes = ("", "nodes")  # one of the ClusterRole's resources: the placement checks read them
    grants = [grant for grant in chart_grants() if (grant.group, grant.resource) != nodes]
    with running_fake_api(*cluster(), grants=grants) as api:
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        with (
            running_server(
                tmp_path, "--kubeconfig", kubeconfig, *ARGS, "--start-timeout", "1", wait_for="/healthz"
            ) as server,
            server.session() as session,
        ):
            answer = eventually(
                lambda: (
                    (r := session.get(f"{server.url}/readyz?verbose", timeout=10)).status_code == 503
                    and "nodes: not synced (initial list failing" in r.text
                    and r.text
                ),
                15,
                "readiness says the nodes list is refused",
            )
            assert "[-] nodes: not synced (initial list failing: the API server answered 403 Forbidden" in answer
            assert session.get(f"{server.url}/readyz", timeout=10).status_code == 503
        refused = [r for r in api.requests if r.path == "/api/v1/nodes"]
    assert refused, "the server asked for the nodes"
    # Each worker's line names every kind it had not loaded at the timeout: the refused nodes, and others than them
    # a slow start may still be listing. Two workers (testkit/server.py), each its own line.
    accepted = [
        line for line in server.log.read_text().splitlines() if "Accepting after the start timeout (1s)" in line
    ]
    assert 1 <= len(accepted) <= 2, accepted
    assert all("nodes: not synced" in line.partition(", not loaded: ")[2] for line in accepted), accepted
