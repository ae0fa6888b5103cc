"""Roles claimed by what anyone may write get their grants only where the policy trusts them
(docs/design.md#2-pod-roles): the table tests/data/trust/spoofed.yaml, every claim as a Pod, a Job and a
Deployment's template, in every place."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from rules import pipeline
from rules.audit import audit_objects
from rules.datasource.scope import NOT_OWNED
from rules.kube.workloads import TEMPLATE_PATHS
from rules.model import Json, Severity
from rules.policy import PolicyError, policy_from_document
from tests.rules.test_datasource import state_objects, subject_object
from tests.support import DATA, load_yaml, mutate_checked, subject, validate_strict, view_from

TABLE = load_yaml(DATA / "trust" / "spoofed.yaml")
POLICY = policy_from_document(TABLE["policy"])
VIEW = view_from(*TABLE["state"])
KINDS = ("Pod", "Job", "Deployment")
TEMPLATE_REASON = NOT_OWNED  # a workload's controller owns its pods: as a Job's pod is, its template is judged


def build(kind: str, claim: Json, namespace: str) -> Json:
    metadata = {"name": "spoof", "namespace": namespace, **copy.deepcopy(claim["metadata"])}
    spec: Json = {
        "restartPolicy": "Never",
        "containers": [{"name": "busybox", "image": "busybox:1.36", "command": ["sleep", "3600"]}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim["claim"]}}],
    }
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    del metadata["namespace"], metadata["name"]
    metadata.pop("ownerReferences", None)  # a template's pods get their owner from the controller
    template = {"metadata": {**metadata}, "spec": spec}
    if kind == "Job":
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "spoof", "namespace": namespace},
            "spec": {"template": template},
        }
    template["metadata"].setdefault("labels", {})["app"] = template["metadata"].get("labels", {}).get("app", "spoof")
    spec["restartPolicy"] = "Always"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "spoof", "namespace": namespace},
        "spec": {"selector": {"matchLabels": dict(template["metadata"]["labels"])}, "template": template},
    }


def cases() -> list[Any]:
    out = []
    for claim in TABLE["claims"]:
        for kind in KINDS:
            for place_name, place in TABLE["places"].items():
                pods_only = claim.get("pods_only") or place.get("pods_only")
                trusted = place_name in claim["trusted_at"] and not (kind != "Pod" and pods_only)
                out.append(pytest.param(claim, kind, place, trusted, id=f"{claim['name']}:{kind}:{place_name}"))
    return out


def expected_message(claim: Json, kind: str, place: Json) -> str:
    user = place.get("user")
    cdi = "why" in claim  # a CDI claim: a template is never CDI's worker
    why = TEMPLATE_REASON if cdi and kind != "Pod" else str(claim.get("why", "")).format(user=user)
    if not cdi and kind != "Pod" and place.get("pods_only"):
        return str(TABLE["workload_warning"]).format(role=claim["warning"].split()[1], reason=_reason(claim), kind=kind)
    who = f" for requester {user}" if user else ""
    return str(claim["warning"]).format(who=who, cdi_why=why)


def _reason(claim: Json) -> str:
    """The role's reason as the claim's warning quotes it: what stands between its first parentheses."""
    warning = str(claim["warning"])
    return warning[warning.index("(") + 1 : warning.index(")")]


@pytest.mark.parametrize(("claim", "kind", "place", "trusted"), cases())
def test_spoofed_role(claim: Json, kind: str, place: Json, trusted: bool) -> None:
    obj = build(kind, claim, place["namespace"])
    validate_strict(obj)
    user = place.get("user")
    mutation, result = mutate_checked(obj, VIEW, POLICY, user=user)
    validation = pipeline.validate(subject(result, user=user), VIEW, POLICY)
    trust_findings = [f for f in validation.findings if f.family == "roleTrust"]
    if trusted:
        granted = claim["granted"] if kind == "Pod" else []
        if kind == "Job":
            granted = [{**op, "path": "/spec/template" + op["path"]} for op in claim["granted"]]
        assert mutation.patch == granted
        assert mutation.warnings == []
        assert validation.findings == []
        return
    message = expected_message(claim, kind, place)
    assert mutation.patch == []  # no toleration, no placement, no record
    assert mutation.warnings == ([] if kind == "Deployment" else [message])  # Deployments are not mutated
    base = {"Pod": "", "Job": "spec.template.", "Deployment": "spec.template."}[kind]
    assert [(f.field, f.message, f.severity) for f in trust_findings] == [
        (base + claim["field"], message, Severity.DENY)
    ]
    assert not validation.allowed


def test_warn_enforcement_turns_the_finding_into_a_warning() -> None:
    """The family follows the policy's enforcement: `validation.roleTrust.enforcement: warn` admits the pod."""
    claim = TABLE["claims"][0]
    pol = policy_from_document({**TABLE["policy"], "validation": {"roleTrust": {"enforcement": "warn"}}})
    place = TABLE["places"]["untrusted namespace"]
    decision = pipeline.validate(subject(build("Pod", claim, "tenant-a"), user=place["user"]), VIEW, pol)
    assert decision.allowed
    assert decision.warnings == [
        f"metadata.annotations[storage-affinity.io/role]: {expected_message(claim, 'Pod', place)}"
    ]


def test_default_policy_trusts_velero_and_one_setting_trusts_oadp() -> None:
    """Safe by default: Velero's namespace alone; OADP's `openshift-adp` is `trust.namespaces`, or the node-agent
    namespace the policy already names (an upgrade that named it keeps its pods placed)."""
    assert policy_from_document({}).trusted_namespaces == {"velero"}
    assert policy_from_document({"trust": {"namespaces": ["openshift-adp"]}}).trusted_namespaces == {"openshift-adp"}
    assert policy_from_document({"nodeAgent": {"namespace": "openshift-adp"}}).trusted_namespaces == {"openshift-adp"}
    source = {"loadAffinitySource": {"configMap": {"namespace": "oadp", "name": "node-agent-config"}}}
    assert policy_from_document(source).trusted_namespaces == {"oadp"}
    assert policy_from_document({"trust": {"namespaces": []}}).trusted_namespaces == set()


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"trust": {"namespaces": ["Tenant_A"]}}, "trust.namespaces[0]"),
        ({"trust": {"namespaces": "velero"}}, "trust.namespaces"),
        ({"trust": {"requesters": [""]}}, "trust.requesters[0]"),
        ({"trust": {"requesters": ["system:serviceaccount:Velero:velero"]}}, "trust.requesters[0]"),
        ({"trust": {"requesters": ["two words"]}}, "trust.requesters[0]"),
        ({"trust": {"requester": []}}, "trust.requester"),
        ({"cdi": {"requesters": ["system:serviceaccount:cdi"]}}, "cdi.requesters[0]"),
    ],
)
def test_a_bad_trust_setting_is_refused_naming_the_field(doc: Json, problem: str) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_from_document(doc)
    assert [path for path, _ in raised.value.problems] == [problem]


@pytest.mark.parametrize(
    ("requester", "message"),
    [
        ("", '"" is not a user name (userInfo.username, no spaces)'),
        ("two words", '"two words" is not a user name (userInfo.username, no spaces)'),
        (
            "system:serviceaccount:cdi",
            "system:serviceaccount:cdi is not system:serviceaccount:<namespace>:<name> with valid names: "
            "must not be empty",
        ),
    ],
)
def test_a_bad_requester_is_refused_saying_why(requester: str, message: str) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_from_document({"trust": {"requesters": [requester]}})
    assert raised.value.problems == [("trust.requesters[0]", message)]


def held(claim: Json, namespace: str, extra: Json) -> Json:
    """A running pod of `claim` that holds what admission once gave it (`extra` laid over it)."""
    pod = build("Pod", claim, namespace)
    pod["metadata"].setdefault("annotations", {}).update(extra.get("annotations", {}))
    pod["spec"].update(extra.get("spec", {}))
    pod["spec"]["nodeName"] = "node-a"
    pod["status"] = {"phase": "Running"}
    return pod


GRANTED = {
    "annotations": {"storage-affinity.io/load-affinity-applied": "gp3"},
    "spec": {"tolerations": [{"key": "node-role.example.com/backup", "operator": "Exists", "effect": "NoSchedule"}]},
}


def test_the_audit_finds_running_pods_holding_grants_they_are_not_trusted_for() -> None:
    """A backup pod of a tenant's namespace admitted before the trust setting (or while the webhook was down)
    still holds the toleration and the load affinity: the audit names each grant. The same pod in Velero's
    namespace holds them rightly; a CDI worker CDI made holds its VM's constraints rightly."""
    backup = TABLE["claims"][2]
    cdi_labels, cdi_owned = TABLE["claims"][4], TABLE["claims"][5]
    follows = {
        "annotations": {"storage-affinity.io/follows-vm": "halted"},
        "spec": {"tolerations": [{"operator": "Exists"}]},
    }
    pods = [
        held(backup, "tenant-a", GRANTED),
        held(backup, "velero", GRANTED),
        held(cdi_labels, "tenant-a", follows),
        held(cdi_owned, "tenant-a", follows),
    ]
    reports = {(r.namespace, r.name, i): r for i, r in enumerate(audit_objects(pods, VIEW, POLICY))}
    trust = {key: [(f.field, f.message) for f in r.findings if f.family == "roleTrust"] for key, r in reports.items()}
    found = list(trust.values())
    tenant_backup = (
        "role backup (labels match roles.backup.selectors[0]) is not trusted in namespace tenant-a: none of its "
        "tolerations or placement applied (the policy's trust.namespaces or trust.requesters trusts it)"
    )
    whose = "to role backup, which is not trusted in namespace tenant-a"
    assert sorted(found) == sorted([
        [
            ("metadata.labels", tenant_backup),
            ("metadata.annotations[storage-affinity.io/load-affinity-applied]",
             f"storage-affinity.io/load-affinity-applied was granted {whose}"),
            ("spec.tolerations", f"the policy's tolerations (node-role.example.com/backup) were granted {whose}"),
        ],
        [],
        [
            ("metadata.labels", "labels claim a CDI importer pod, not trusted: it is not controlled by a claim it "
             "mounts, as CDI's workers are; no VM's tolerations or placement applied"),
            ("metadata.annotations[storage-affinity.io/follows-vm]",
             "a VM's tolerations and placement were granted to a CDI worker's labels: it is not controlled by a "
             "claim it mounts, as CDI's workers are"),
        ],
        [],
    ])  # fmt: skip


def test_what_grants_nothing_beyond_the_namespace_keeps_working_for_an_untrusted_claim() -> None:
    """Velero's DataUpload backup pod restored from a snapshot (tests/data/datasource/scope.yaml), moved with its
    snapshot and claim into a tenant's namespace: the role's grants are gone, but the data-source placement, a
    restriction to where the pod's own claim's data lives, is made as in Velero's namespace."""
    case = next(c for c in load_yaml(DATA / "datasource" / "scope.yaml") if c["name"].startswith("a Velero DataUpload"))
    obj, state = (
        json.loads(json.dumps(value).replace('"velero"', '"tenant-a"'))
        for value in (subject_object(case), state_objects(case["state"]))
    )
    assert obj["metadata"]["namespace"] == "tenant-a"
    mutation, _ = mutate_checked(obj, view_from(*state), policy_from_document({}))
    assert mutation.patch == case["patch"]
    assert [w.partition(" is not trusted")[0] for w in mutation.warnings] == [
        "role backup (labels match roles.backup.selectors[0])"
    ]


@pytest.mark.parametrize("kind", sorted(TEMPLATE_PATHS))
def test_a_workload_from_a_trusted_requester_is_refused_where_its_pods_would_be(kind: str) -> None:
    """Every workload kind's pods are created by its controller, not by the requester the policy trusts: the
    workload itself is refused, saying so, rather than admitted to have its pods refused (a Pod from the same
    requester is trusted)."""
    claim = TABLE["claims"][2]  # the default backup selector's label
    place = TABLE["places"]["trusted requester"]
    template = {"metadata": copy.deepcopy(claim["metadata"]), "spec": build("Pod", claim, "tenant-a")["spec"]}
    obj: Json = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "spoof", "namespace": "tenant-a"}}
    holder = obj
    *parents, last = TEMPLATE_PATHS[kind]
    for part in parents:
        holder = holder.setdefault(part, {})
    holder[last] = template
    decision = pipeline.validate(subject(obj, user=place["user"]), VIEW, POLICY)
    trust = [f.message for f in decision.findings if f.family == "roleTrust"]
    assert trust == [expected_message(claim, kind, place)] and not decision.allowed
    assert f"for a {kind}: its pods are created by its controller" in trust[0]
    pod = pipeline.validate(subject(build("Pod", claim, "tenant-a"), user=place["user"]), VIEW, POLICY)
    assert not [f for f in pod.findings if f.family == "roleTrust"]
