"""Least privilege: read-only cluster-wide, and in mode self writes scoped to the server's own objects; policy
reports and their Lease are the only other writes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.chart_helpers import FULLNAME, NAMESPACE, SCENARIOS, Manifest, args, kinds, one, render, render_error

READ = ["get", "list", "watch"]
READ_RULES = [
    {
        "apiGroups": [""],
        "resources": ["pods", "persistentvolumeclaims", "persistentvolumes", "nodes", "configmaps"],
        "verbs": READ,
    },
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": READ},
    {
        "apiGroups": ["snapshot.storage.k8s.io"],
        "resources": ["volumesnapshots", "volumesnapshotcontents"],
        "verbs": READ,
    },
    {"apiGroups": ["kubevirt.io"], "resources": ["virtualmachines"], "verbs": READ},
    {"apiGroups": ["cdi.kubevirt.io"], "resources": ["datavolumes"], "verbs": READ},
    {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["referencegrants"], "verbs": READ},
]
# The only rules that may write, all of them certificate mode self.
SELF_ROLE_RULES = [
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    {
        "apiGroups": [""],
        "resources": ["secrets"],
        "resourceNames": [f"{FULLNAME}-tls"],
        "verbs": ["get", "update", "patch"],
    },
]
SELF_CLUSTER_RULES = [
    {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations"],
        "resourceNames": [FULLNAME],
        "verbs": ["get", "update", "patch"],
    },
    {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["validatingwebhookconfigurations"],
        "resourceNames": [FULLNAME],
        "verbs": ["get", "update", "patch"],
    },
]


REPORT_VERBS = ["list", "create", "update", "delete"]
OPENREPORTS_RULE = {"apiGroups": ["openreports.io"], "resources": ["reports"], "verbs": REPORT_VERBS}
WGPOLICY_RULE = {"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports"], "verbs": REPORT_VERBS}
REPORT_RULES = [OPENREPORTS_RULE, WGPOLICY_RULE]
LEASE_ROLE_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": [FULLNAME],
        "verbs": ["get", "update"],
    },
]


def _rules(docs: list[Manifest], kind: str) -> list[dict[str, Any]]:
    return [rule for role in kinds(docs, kind) for rule in role["rules"]]


def test_every_rule_reads_only_except_the_scoped_self_mode_rules(rendered: list[Manifest]) -> None:
    for kind in ("ClusterRole", "Role"):
        for rule in _rules(rendered, kind):
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
            if set(rule["verbs"]) <= set(READ):
                assert "secrets" not in rule["resources"], rule
                continue
            allowed = SELF_ROLE_RULES + LEASE_ROLE_RULES if kind == "Role" else SELF_CLUSTER_RULES + REPORT_RULES
            assert rule in allowed, rule


def test_self_mode_rbac() -> None:
    docs = render()
    assert one(docs, "ClusterRole", FULLNAME)["rules"] == READ_RULES
    assert one(docs, "ClusterRole", f"{FULLNAME}-cabundle")["rules"] == SELF_CLUSTER_RULES
    role = one(docs, "Role", f"{FULLNAME}-certs")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == SELF_ROLE_RULES
    # get/update/patch name exactly the Secret the server is told to use.
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert f"--cert-secret={FULLNAME}-tls" in container["args"]


def test_other_modes_only_read() -> None:
    for name in ("cert-manager", "provided"):
        docs = render({**SCENARIOS[name], "reports": {"api": "off"}})
        assert _rules(docs, "ClusterRole") == READ_RULES
        assert _rules(docs, "Role") == []


@pytest.mark.parametrize(
    ("api", "rules"),
    [("auto", REPORT_RULES), ("openreports", [OPENREPORTS_RULE]), ("wgpolicyk8s", [WGPOLICY_RULE]), ("off", None)],
)
def test_reports_write_exactly_their_kind_and_one_lease(api: str, rules: list[dict[str, Any]] | None) -> None:
    docs = render({"reports": {"api": api}})
    arguments = args(docs)
    assert arguments["--reports"] == api
    if rules is None:
        assert not [d for d in docs if d["metadata"]["name"].endswith(("-reports", "-lease"))]
        assert "--lease-name" not in arguments
        return
    assert one(docs, "ClusterRole", f"{FULLNAME}-reports")["rules"] == rules
    lease = one(docs, "Role", f"{FULLNAME}-lease")
    assert lease["metadata"]["namespace"] == NAMESPACE and lease["rules"] == LEASE_ROLE_RULES
    # get/update name exactly the Lease the server is told to use, in the namespace it is told.
    assert arguments["--lease-name"] == FULLNAME and arguments["--namespace"] == NAMESPACE
    assert (arguments["--lease-duration"], arguments["--lease-renew-deadline"], arguments["--lease-retry-period"]) == (
        "15",
        "10",
        "2",
    )


def test_lease_timing_that_allows_two_writers_does_not_render() -> None:
    error = render_error({"leaderElection": {"leaseDurationSeconds": 10, "renewDeadlineSeconds": 10}})
    assert "retryPeriodSeconds (2) < renewDeadlineSeconds (10) < leaseDurationSeconds (10) is required" in error


def test_bindings_point_at_the_service_account(rendered: list[Manifest]) -> None:
    roles = {(r["kind"], r["metadata"]["name"]) for r in kinds(rendered, "ClusterRole") + kinds(rendered, "Role")}
    bindings = kinds(rendered, "ClusterRoleBinding") + kinds(rendered, "RoleBinding")
    assert len(bindings) == len(roles)
    for binding in bindings:
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in roles
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]
    one(rendered, "ServiceAccount", FULLNAME)


def test_rbac_can_be_left_to_the_operator() -> None:
    docs = render({"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "existing"}})
    assert not [d for d in docs if d["apiVersion"].startswith("rbac.")]
    assert not kinds(docs, "ServiceAccount")
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "existing"
