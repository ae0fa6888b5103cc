"""Least privilege: read-only cluster-wide, and in mode self writes scoped to the server's own objects."""

from __future__ import annotations

from typing import Any

from chart_helpers import FULLNAME, NAMESPACE, SCENARIOS, Manifest, kinds, one, render

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


def _rules(docs: list[Manifest], kind: str) -> list[dict[str, Any]]:
    return [rule for role in kinds(docs, kind) for rule in role["rules"]]


def test_every_rule_reads_only_except_the_scoped_self_mode_rules(rendered: list[Manifest]) -> None:
    for kind in ("ClusterRole", "Role"):
        for rule in _rules(rendered, kind):
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
            if set(rule["verbs"]) <= set(READ):
                assert "secrets" not in rule["resources"], rule
                continue
            assert rule in (SELF_ROLE_RULES if kind == "Role" else SELF_CLUSTER_RULES), rule


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
        docs = render(SCENARIOS[name])
        assert _rules(docs, "ClusterRole") == READ_RULES
        assert _rules(docs, "Role") == []


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
