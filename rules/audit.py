"""The audit of existing objects: what admission would say of them now, and whether pods sit where they belong.

Admission sees an object once. Pods admitted while the webhook was down (it fails open), before a policy change or
before their claim's holder moved are never looked at again; the audit runs the same pipeline over them: every
validating rule, and the mutating rules in "what would change" mode (the patch is computed, never applied to the
cluster). A Pending mover whose claim is held on another node is flagged `multi_attach`: the kubelet cannot attach
a ReadWriteOnce volume to two nodes, so it stays Pending with a Multi-Attach error until someone moves it.

Given the time (`now`), a storage pod stuck longer than the policy's `audit.stuckAfterSeconds` gets one cause
(rules/causes/) and a `stuckPod` finding that names it; one that ended Failed within the policy's
`audit.failedWithinSeconds` gets one too (rules/causes/ended.py), with a `failedPod` finding.

Pure, like every rule: the objects come in, findings go out. Reading them (manifests or the API) and printing
is webhook/audit/command.py; running on the server's own state, its metrics and reports, webhook/audit/loop.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rules import budget, deadline, pipeline
from rules.annotations import FOLLOWS_VM, LOAD_AFFINITY_APPLIED, NODE_AGENT_RESTRICTED
from rules.causes import (
    NO_NODE_AGENT,
    Stuck,
    StuckCause,
    duration,
    ended_cause,
    ended_seconds,
    storage_role,
    stuck_cause,
    stuck_seconds,
)
from rules.checks.trust import FAMILY as ROLE_TRUST
from rules.cluster import ClusterView, LookupFailed
from rules.context import BadObject, PodTarget
from rules.coscheduling.anchors import plan
from rules.coscheduling.claimpods import claims_read_once, name_of
from rules.datasource.scope import cdi_trust_problem, filling_worker
from rules.datasource.vm import vm_disk_problems
from rules.deadline import PastDeadline
from rules.kube.feasible import Feasibility, on_labels
from rules.kube.nodeaffinity import required_node_affinity, required_terms
from rules.kube.workloads import TEMPLATE_PATHS
from rules.loadaffinity.loaded import config_not_loaded
from rules.loadaffinity.nodeagents import FAMILY as NODE_AGENT
from rules.loadaffinity.nodeagents import pending_pod_problem
from rules.loadaffinity.validation import FAMILY as LOAD_AFFINITY
from rules.model import Decision, Json, Subject
from rules.pipeline import PAST_DEADLINE, RULE_ERROR, STRICT_FAMILIES
from rules.policy import Policy, validation_families
from rules.quoting import ShownText

#: The kinds the audit reviews; every other object is read as cluster state only. A workload (rules/kube/workloads.py)
#: is checked as `/validate` checks a changed template, by the template rules: its pods exist or come later, and
#: those that exist are audited as Pods.
AUDITED_KINDS = ("Pod", *TEMPLATE_PATHS, "ConfigMap", "VirtualMachine")
PLACED_ROLES = ("mover", "backup", "restore")
#: The pseudo-family of a pod that admission would place differently now.
DRIFT = "placementDrift"
#: The pseudo-family of a storage pod stuck longer than the policy allows.
STUCK = "stuckPod"
#: The pseudo-family of a storage pod that ended Failed within the policy's window.
FAILED = "failedPod"
#: The family of a VM disk bound on a node the VM's constraints exclude.
VM_DISK = "vmDisk"


def finding_families() -> tuple[str, ...]:
    """Every family an audit finding can carry: the policy's per-family switches, the families enforcement never
    relaxes, rule errors, and the audit's own."""
    return (*validation_families(), *sorted(STRICT_FAMILIES), RULE_ERROR, DRIFT, STUCK, FAILED, VM_DISK)


@dataclass(frozen=True)
class AuditFinding(ShownText):
    """One finding as the audit prints and reports it; its field and message are escaped when it is made."""

    family: str
    field: str
    message: str
    severity: str  # deny or warn, after the policy's enforcement

    def as_json(self) -> Json:
        return {"family": self.family, "field": self.field, "message": self.message, "severity": self.severity}


@dataclass
class ObjectAudit(ShownText):
    """One object's audit. `placement` is set for mover, backup and restore pods: `ok`, `misplaced`, `pending`
    (not scheduled yet) or `unknown-node`; `wanted` says where admission would place it now. What it holds is
    what the audit prints: every text field is escaped when set (`ShownText`), so the rules that judge the object
    read its own fields, never these."""

    kind: str
    namespace: str
    name: str
    role: str = ""
    phase: str = ""
    node: str = ""
    placement: str = ""
    wanted: str = ""
    would_change: list[Json] = field(default_factory=list)
    findings: list[AuditFinding] = field(default_factory=list)
    multi_attach: bool = False
    cause: StuckCause | None = None  # set for a storage pod stuck longer than the policy allows, or ended Failed

    @property
    def clean(self) -> bool:
        return not self.findings

    def sort_key(self) -> tuple[int, str, str, str]:
        return (0 if self.multi_attach else 1, self.namespace, self.kind, self.name)

    def as_json(self) -> Json:
        out: Json = {"kind": self.kind, "namespace": self.namespace, "name": self.name}
        for key in ("role", "phase", "node", "placement", "wanted"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.would_change:
            out["wouldChange"] = self.would_change
        out["multiAttach"] = self.multi_attach
        if self.cause is not None:
            out["cause"] = self.cause.as_json()
        out["findings"] = [f.as_json() for f in self.findings]
        return out


def audit_objects(
    objects: Iterable[Mapping[str, Any]],
    view: ClusterView,
    policy: Policy,
    own_namespace: str = "",
    now: datetime | None = None,
    *,
    ordered: bool = True,
    between: Callable[[], None] | None = None,
) -> list[ObjectAudit]:
    """Every object of an audited kind among `objects`, in the order to show them: Multi-Attach movers first.
    Without `now`, no pod is judged stuck. `ordered=False` keeps the objects' order: for the in-server audit,
    whose metrics and reports (rules/reports.py orders each namespace's results) need none, and which would hold
    the worker for the whole sort (30 ms for 20,000 reports) after its last time slice. `between` is called
    between the parts of one object's audit that each run under a deadline, outside them: the in-server audit
    hands the worker back there, so that no stretch without a yield is longer than one deadline."""
    with claims_read_once():  # a claim N pods share is read once, not once per pod
        reports = [
            audit_object(obj, view, policy, own_namespace, now, between=between)
            for obj in objects
            if obj.get("kind") in AUDITED_KINDS
        ]
    return sorted(reports, key=ObjectAudit.sort_key) if ordered else reports


def audit_object(
    obj: Mapping[str, Any],
    view: ClusterView,
    policy: Policy,
    own_namespace: str = "",
    now: datetime | None = None,
    *,
    between: Callable[[], None] | None = None,
) -> ObjectAudit:
    """One object's audit. Each webhook's rules run under their own review deadline, as in admission, and the
    audit's own work after them (where the pod would go, why it waits) under one more: an object past any of them
    is reported as not audited (`budget`), which the in-server audit remembers until the object changes."""
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(metadata, Mapping)
    kind = str(obj.get("kind"))
    namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
    report = ObjectAudit(kind, namespace, name)
    try:
        _audit(report, obj, view, policy, own_namespace=own_namespace, now=now, between=between)
    except PastDeadline as exc:  # the audit's own work, after the webhooks' rules
        report.findings = [f for f in report.findings if f.family != budget.FAMILY]
        report.findings.append(not_audited(str(exc), policy))
    return report


def not_audited(why: str, policy: Policy) -> AuditFinding:
    """The finding of an object whose review ran past the review deadline: reported, not audited."""
    return AuditFinding(budget.FAMILY, "", f"not audited: {why}", policy.enforcement_for(budget.FAMILY))


def _audit(
    report: ObjectAudit,
    obj: Mapping[str, Any],
    view: ClusterView,
    policy: Policy,
    *,
    own_namespace: str,
    now: datetime | None,
    between: Callable[[], None] | None,
) -> None:
    kind, namespace, name = report.kind, report.namespace, report.name
    if kind == "VirtualMachine":  # its disks against its constraints; admission never sees a VM
        with deadline.running():
            report.findings = [
                AuditFinding(VM_DISK, f, m, "deny")
                for f, m in vm_disk_problems(obj, view, policy.disclosed_node_labels)
            ]
        return
    subject = Subject(kind=kind, operation="CREATE", namespace=namespace, name=name, obj=dict(obj))
    try:
        if kind in TEMPLATE_PATHS:  # nothing to place: a workload is stored, its template is what pods come from
            validation = pipeline.validate(subject, view, policy, own_namespace, existing=True)
            report.findings = _findings(validation)
            _past_deadline(report, policy, validation)
            return
        chain = pipeline.mutate_then_validate(subject, view, policy, own_namespace, between=between)
    except BadObject as exc:
        report.findings = [AuditFinding("object", path, message, "deny") for path, message in exc.problems]
        return
    mutation, final = chain.mutation, chain.final or {}
    # Mutators only warn: the findings are validation's (a value the boundary refuses is reported by both).
    report.findings = _findings(chain.validation)
    if _past_deadline(report, policy, chain.validation, mutation):
        return
    if mutation.over_budget is not None or chain.validation.over_budget is not None:
        if chain.validation.over_budget is None:  # the placement, not the object itself, would pass a limit
            severity = policy.enforcement_for(budget.FAMILY)
            report.findings.append(AuditFinding(budget.FAMILY, "", mutation.over_budget or "", severity))
        return  # where it would go and why it waits would cost past the budget too
    if kind == "ConfigMap" and (namespace, name) == policy.load_affinity_source:
        with deadline.running():
            if (unloaded := config_not_loaded(view, policy)) is not None:
                message = f"{unloaded.message}; remedy: {unloaded.remedy}"
                report.findings.append(AuditFinding(LOAD_AFFINITY, "", message, "warn"))
    if kind != "Pod" or not mutation.allowed:
        return
    if between is not None:
        between()
    with deadline.running():
        _placed(report, subject, final, mutation, view=view, policy=policy, own_namespace=own_namespace, now=now)


def _placed(
    report: ObjectAudit,
    subject: Subject,
    final: Json,
    mutation: Decision,
    *,
    view: ClusterView,
    policy: Policy,
    own_namespace: str,
    now: datetime | None,
) -> None:
    """What only the audit asks of a pod admission would let in: grants it holds untrusted, where it sits
    against where admission would place it, and why it waits."""
    target = pipeline.pod_target(subject, policy, own_namespace)
    severity = policy.enforcement_for(ROLE_TRUST)
    report.findings += [AuditFinding(ROLE_TRUST, f, m, severity) for f, m in untrusted_grants(target, policy)]
    report.role = storage_role(target)
    pod = subject.obj or {}
    report.phase = str((pod.get("status") or {}).get("phase") or "Pending")
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    report.node = node
    if report.role in PLACED_ROLES:
        _placement(report, target, node, final=final, mutation=mutation, view=view, policy=policy)
    if now is not None and report.role:
        _stuck(report, pod, target, view=view, policy=policy, now=now)
    told = report.cause is not None and report.cause.code == NO_NODE_AGENT  # the stuck-pod finding says it
    if report.role in ("backup", "restore") and report.phase == "Pending" and not told:
        problem = pending_pod_problem(view, policy, report.namespace, final.get("spec") or {})
        if problem is not None:
            report.findings.append(AuditFinding(NODE_AGENT, *problem, "warn"))


def _past_deadline(report: ObjectAudit, policy: Policy, *decisions: Decision) -> bool:
    """Whether a webhook's rules ran past the review deadline: then its `budget` finding reads "not audited"."""
    past = next((d.audit[PAST_DEADLINE] for d in decisions if PAST_DEADLINE in d.audit), None)
    if past is None:
        return False
    report.findings = [f for f in report.findings if f.family != budget.FAMILY]
    report.findings.append(not_audited(past, policy))
    return True


def untrusted_grants(target: PodTarget, policy: Policy) -> list[tuple[str, str]]:
    """(field, message) for each grant an existing pod holds for a role the policy does not trust it with: admitted
    before the trust setting, while the webhook was down, or under another policy. The audit knows no requester,
    so a pod trusted only by `trust.requesters` is reported too."""
    annotations = target.metadata.get("annotations") or {}
    at = target.field("metadata.annotations")
    role = target.role
    if role.role is not None and not role.trusted:
        whose = f"role {role.role}, which is not trusted in namespace {target.namespace}"
        held = [(f"{at}[{key}]", f"{key} was granted") for key in (LOAD_AFFINITY_APPLIED, NODE_AGENT_RESTRICTED)
                if key in annotations]  # fmt: skip
        tolerations = [t for t in target.spec.get("tolerations") or () if t in policy.tolerations]
        if tolerations:
            keys = ", ".join(sorted({str(t.get("key") or "(every taint)") for t in tolerations}))
            held.append((target.field("spec.tolerations"), f"the policy's tolerations ({keys}) were granted"))
        return [(field, f"{what} to {whose}") for field, what in held]
    held_vm = filling_worker(target) is not None and FOLLOWS_VM in annotations
    if held_vm and (why := cdi_trust_problem(policy, target, None)):
        return [
            (f"{at}[{FOLLOWS_VM}]", f"a VM's tolerations and placement were granted to a CDI worker's labels: {why}")
        ]
    return []


def _stuck(
    report: ObjectAudit, pod: Json, target: PodTarget, *, view: ClusterView, policy: Policy, now: datetime
) -> None:
    """Name the cause of a storage pod stuck longer than the policy allows, or ended Failed within its window, as
    `cause` and a finding."""
    seconds = stuck_seconds(pod, now)
    if seconds is None:
        ended = ended_seconds(pod, now)
        if ended is not None and ended < policy.failed_within:
            report.cause = ended_cause(Stuck(pod, target, view, policy, ended))
            message = f"ended Failed {duration(ended)} ago: {report.cause.message}"
            report.findings.append(AuditFinding(FAILED, "status", message, "warn"))
        return
    if seconds < policy.stuck_after:
        return
    report.cause = stuck_cause(Stuck(pod, target, view, policy, seconds))
    message = f"stuck for {duration(seconds)}: {report.cause.message}"
    report.findings.append(AuditFinding(STUCK, "status", message, "warn"))


def _findings(decision: Decision) -> list[AuditFinding]:
    return [AuditFinding(f.family, f.field, f.message, f.severity.value) for f in decision.findings]


def _placement(
    report: ObjectAudit,
    target: PodTarget,
    node: str,
    *,
    final: Json,
    mutation: Decision,
    view: ClusterView,
    policy: Policy,
) -> None:
    """Where admission would put the pod now, and whether its node (`node`, as the pod names it) is such a
    place."""
    spec = final.get("spec") or {}
    node_name = ""
    if report.role == "mover":
        lead = plan(view, policy, target).lead
        if lead is not None and lead.node:
            node_name = lead.node
            report.wanted = f"node {lead.node} (with pod {name_of(lead.anchor or {})})"
    elif spec.get("nodeName") and spec.get("nodeName") != node:
        node_name = str(spec["nodeName"])
        report.wanted = f"node {node_name}"
    elif required_node_affinity(spec) is not None:
        report.wanted = "a node matching its required node affinity"
    report.would_change = mutation.patch
    if not node:
        report.placement = "pending"
        if mutation.patch:
            message = "not scheduled yet, and without the placement admission would give it now"
            report.findings.append(AuditFinding(DRIFT, "spec", message, "warn"))
    elif (found := _node_or_none(view, node)) is None:
        report.placement = "unknown-node"
    elif (not node_name or node_name == node) and _own(view, policy, spec).fits(found):
        report.placement = "ok"
    else:
        report.placement = "misplaced"
        message = f"runs on node {report.node}; admission would place it on {report.wanted or 'another node'} now"
        report.findings.append(AuditFinding(DRIFT, "spec.nodeName", message, "warn"))
    # Scheduled away from the node that holds its claim and still Pending: the kubelet's Multi-Attach error.
    report.multi_attach = report.role == "mover" and report.phase == "Pending" and report.placement == "misplaced"


def _own(view: ClusterView, policy: Policy, spec: Mapping[str, Any]) -> Feasibility:
    """The pod's nodeSelector and required node affinity on the labels its author may know (a finding reaches its
    namespace's report), for the node it is on."""
    filters = on_labels(policy.disclosed_node_labels, volumes=False)
    return Feasibility(view, filters, selector=spec.get("nodeSelector"), terms=required_terms(spec))


def _node_or_none(view: ClusterView, name: str) -> Json | None:
    """The pod's node, or None when it is gone or cannot be read now (one unreadable node must not end the audit
    of every other object)."""
    try:
        return view.node(name)
    except LookupFailed:
        return None
