"""Least privilege: the chart grants exactly what the server calls (tests/data/rbac/server-calls.yaml), in every
certificate mode and report API; ConfigMaps only by name in their namespaces."""

from __future__ import annotations

from typing import Any

import pytest
from allpairspy import AllPairs

from rules.reports import REPORT_NAME
from tests.chart.chart_helpers import FULLNAME, NAMESPACE, SCENARIOS, Manifest, args, kinds, one, render, render_error
from tests.rbac_calls import Grant, expected_grants, rendered_grants

# SCENARIOS: self is the default
CERTIFICATE_MODES = ["default", "cert-manager", "cert-manager-issuer", "provided", "service-ca"]
REPORT_APIS = {"auto": ["openreports", "wgpolicyk8s"], "openreports": ["openreports"], "wgpolicyk8s": ["wgpolicyk8s"]}
VELERO = {"namespace": "velero", "name": "node-agent-config"}


def _grants_of_the_list(values: dict[str, Any]) -> set[Grant]:
    """What tests/data/rbac/server-calls.yaml says the server calls, for these values."""
    api = values.get("reports", {}).get("api", "auto")
    conditions = set(REPORT_APIS.get(api, []))
    if api != "off":
        conditions.add("reports")
    if values.get("events", {}).get("enabled", True):
        conditions.add("events")
    if conditions & {"reports", "events"}:
        conditions.add("lease")
    if values.get("certificates", {}).get("mode", "self") == "self":
        conditions.add("self")
    source = values.get("policy", {}).get("loadAffinitySource", {}).get("configMap")
    if source:
        conditions.add("velero")
    data_mover = values.get("policy", {}).get("nodeAgent", {}).get("namespace") or (source or {}).get("namespace")
    if data_mover:
        conditions.add("datamover")
    names = {
        "policy-configmap": ["storage-affinity-policy"],
        "velero-configmap": [source["name"]] if source else [],
        "lease": [FULLNAME],
        "tls-secret": [f"{FULLNAME}-tls"],
        "webhook-configuration": [FULLNAME],
        "report": [REPORT_NAME],
    }
    namespaces = {"release": NAMESPACE, "velero": source["namespace"] if source else "", "datamover": data_mover or ""}
    return expected_grants(conditions, namespaces, names)


#: How a policy names Velero's namespace: not at all, by the ConfigMap it reads, or as OADP's node-agents' (which
#: then differs from the ConfigMap's).
VELERO_POLICIES: dict[str, dict[str, Any]] = {
    "no-velero-source": {},
    "velero-source": {"loadAffinitySource": {"configMap": VELERO}},
    "node-agent-namespace": {"nodeAgent": {"namespace": "openshift-adp"}, "loadAffinitySource": {"configMap": VELERO}},
}


#: The settings the chart's RBAC depends on: certificate mode, report API, how the policy names Velero, Events.
SETTINGS: list[list[Any]] = [CERTIFICATE_MODES, [*REPORT_APIS, "off"], list(VELERO_POLICIES), [True, False]]
#: Every pair of values of any two settings, in at least one rendering (allpairspy): 20 renderings where every
#: combination took 120. No RBAC template of the chart joins more than two settings in a condition (the Lease's
#: joins the report API and Events), so every branch they take is rendered.
COMBINATIONS = [tuple(row) for row in AllPairs(SETTINGS)]


@pytest.mark.parametrize(
    ("mode", "api", "velero", "events"),
    COMBINATIONS,
    ids=[f"{m}-{a}-{v}-{'events' if e else 'no-events'}" for m, a, v, e in COMBINATIONS],
)
def test_the_chart_grants_exactly_what_the_server_calls(mode: str, api: str, velero: str, events: bool) -> None:
    values = {**SCENARIOS[mode], "reports": {"api": api}, "events": {"enabled": events}}
    if VELERO_POLICIES[velero]:
        values["policy"] = VELERO_POLICIES[velero]
    granted = rendered_grants(render(values))
    wanted = _grants_of_the_list(values)
    assert not granted - wanted, f"granted and never called: {sorted(granted - wanted, key=str)}"
    assert not wanted - granted, f"called and not granted: {sorted(wanted - granted, key=str)}"


def test_the_combinations_hold_every_pair_of_settings() -> None:
    seen = {((i, row[i]), (j, row[j])) for row in COMBINATIONS for i in range(len(row)) for j in range(i + 1, len(row))}
    wanted = {
        ((i, a), (j, b))
        for i, first in enumerate(SETTINGS)
        for j, second in enumerate(SETTINGS)
        if i < j
        for a in first
        for b in second
    }
    assert wanted <= seen and len(COMBINATIONS) < 30


def test_no_cluster_role_grants_configmaps_or_secrets() -> None:
    for mode in CERTIFICATE_MODES:
        docs = render({**SCENARIOS[mode], "policy": {"loadAffinitySource": {"configMap": VELERO}}})
        for role in kinds(docs, "ClusterRole"):
            for rule in role["rules"]:
                assert not {"configmaps", "secrets"} & set(rule["resources"]), (role["metadata"]["name"], rule)
                assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule


def test_configmaps_are_read_by_name_in_their_namespaces() -> None:
    docs = render({"policy": {"loadAffinitySource": {"configMap": VELERO}}})
    roles = {
        role["metadata"]["namespace"]: role
        for role in kinds(docs, "Role")
        if role["metadata"]["name"].endswith("-configmaps")
    }
    assert roles[NAMESPACE]["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["storage-affinity-policy"],
            "verbs": ["list", "watch"],
        }
    ]
    assert roles["velero"]["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["node-agent-config"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    # Velero's ConfigMap in the release namespace: one Role with both rules.
    same = render({"policy": {"loadAffinitySource": {"configMap": {"namespace": NAMESPACE, "name": "nac"}}}})
    (role,) = [r for r in kinds(same, "Role") if r["metadata"]["name"].endswith("-configmaps")]
    assert [rule["resourceNames"] for rule in role["rules"]] == [["storage-affinity-policy"], ["nac"]]
    assert args(docs)["--policy-configmap"] == "storage-affinity-policy"


def test_self_mode_names_the_secret_it_is_granted() -> None:
    container = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert f"--cert-secret={FULLNAME}-tls" in container["args"]


def test_reports_are_replaced_and_deleted_by_their_one_name() -> None:
    docs = render({"reports": {"api": "openreports"}})
    (named,) = [rule for rule in one(docs, "ClusterRole", f"{FULLNAME}-reports")["rules"] if "resourceNames" in rule]
    assert named["resourceNames"] == [REPORT_NAME]


@pytest.mark.parametrize("events", [True, False], ids=["events", "no-events"])
@pytest.mark.parametrize("api", [*REPORT_APIS, "off"])
def test_reports_and_events_name_the_lease_the_server_is_told(api: str, events: bool) -> None:
    arguments = args(render({"reports": {"api": api}, "events": {"enabled": events}}))
    assert arguments["--reports"] == api
    assert arguments["--events"] == ("on" if events else "off")
    if api == "off" and not events:
        assert "--lease-name" not in arguments
        return
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
    def where(doc: Manifest) -> str:
        return str(doc["metadata"].get("namespace", "")) if doc["kind"] in ("Role", "RoleBinding") else ""

    roles = {
        (r["kind"], r["metadata"]["name"], where(r)) for r in kinds(rendered, "ClusterRole") + kinds(rendered, "Role")
    }
    bindings = kinds(rendered, "ClusterRoleBinding") + kinds(rendered, "RoleBinding")
    assert len(bindings) == len(roles)
    for binding in bindings:
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"], where(binding)) in roles
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]
    one(rendered, "ServiceAccount", FULLNAME)


def test_rbac_can_be_left_to_the_operator() -> None:
    docs = render({"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "existing"}})
    assert not [d for d in docs if d["apiVersion"].startswith("rbac.")]
    assert not kinds(docs, "ServiceAccount")
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "existing"
