"""The admission pipeline: which rules run for which object, and how their results become one Decision.

Rules are plain functions `(ctx, target) -> None` that write to `target.patch` and report through `ctx`.
A failing rule never escapes: its effect follows the policy's `onLookupFailure`, and a failed mutation is
discarded whole (never a half-applied change).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rules.annotations import annotation_problems
from rules.cluster import ClusterView, LookupFailed
from rules.context import BadObject, Context, PodTarget
from rules.echo import clip, escaped
from rules.model import Decision, Finding, Json, Severity, Subject
from rules.patch import PatchBuilder
from rules.policy import POLICY_LABEL, Policy, PolicyError, policy_from_config_map
from rules.roles import classify
from rules.shape import object_problems

log = logging.getLogger(__name__)

POD_KINDS = ("Pod", "Job")
#: Finding families that enforcement never relaxes: a broken policy must never land, and an object whose values
#: no rule can read (the API server would refuse it too) is never admitted unchecked.
STRICT_FAMILIES = frozenset({"policy", "object"})
#: The family of a rule that raised. It follows the policy's global `enforcement`: with `deny` (the default) a
#: validation that could not be computed denies (fail closed); an operator who chose `warn` gets a warning.
RULE_ERROR = "internal"


Rule = Callable[[Context, PodTarget], None]
ConfigMapRule = Callable[[Context, Json], None]

#: Mutating rules by role. Filled by the rule modules' registration below.
MUTATORS: dict[str, Rule] = {}
#: Validating rules for Pods and Job templates, in order.
POD_VALIDATORS: list[Rule] = []
#: Validating rules for ConfigMaps.
CONFIG_MAP_VALIDATORS: list[ConfigMapRule] = []


def mutate(subject: Subject, view: ClusterView, policy: Policy, own_namespace: str = "") -> Decision:
    """The mutating webhook's decision: patch operations only on CREATE of a Pod or Job."""
    ctx = Context(subject, view, policy, own_namespace)
    if subject.operation != "CREATE" or subject.kind not in POD_KINDS or not isinstance(subject.obj, dict):
        return ctx.decision
    if not _checked(ctx):
        return ctx.decision
    target = pod_target(subject, policy, own_namespace)
    ctx.reason(f"role: {target.role.role or 'none'} ({target.role.reason})")
    mutator = MUTATORS.get(target.role.role or "")
    if mutator is None:
        return ctx.decision
    if not _run(ctx, mutator, target):
        return ctx.decision
    ctx.decision.patch = target.patch.operations()
    return ctx.decision


def validate(subject: Subject, view: ClusterView, policy: Policy, own_namespace: str = "") -> Decision:
    """The validating webhook's decision: findings with enforcement applied."""
    ctx = Context(subject, view, policy, own_namespace)
    if not isinstance(subject.obj, dict) or subject.operation not in ("CREATE", "UPDATE"):
        return ctx.decision
    if subject.kind == "Job" and subject.operation != "CREATE":
        return ctx.decision
    if not _checked(ctx):
        _apply_enforcement(ctx)
        return ctx.decision
    if subject.kind in POD_KINDS:
        target = pod_target(subject, policy, own_namespace)
        if target.role.exempt:
            ctx.reason(f"exempt: {target.role.reason}")
            return ctx.decision
        for rule in POD_VALIDATORS:
            _run(ctx, rule, target)
    elif subject.kind == "ConfigMap":
        for cm_rule in CONFIG_MAP_VALIDATORS:
            _run(ctx, cm_rule, subject.obj)
    _apply_enforcement(ctx)
    return ctx.decision


def _checked(ctx: Context) -> bool:
    """The typed boundary, before any rule: raises BadObject for mistyped fields (of the object, and of the old
    object that UPDATE rules compare with); a value no rule can digest is a finding, and no rule runs."""
    subject = ctx.subject
    for source, value in (("object", subject.obj), ("oldObject", subject.old)):
        if value is None or (source == "oldObject" and subject.operation != "UPDATE"):
            continue
        problems = object_problems(subject.kind, value)
        if problems.types:
            raise BadObject(problems.types, source)
        for path, message in problems.values:
            ctx.find(path, message, "object")
    return not ctx.decision.findings


def pod_target(subject: Subject, policy: Policy, own_namespace: str) -> PodTarget:
    """The pod (or Job template) under review, once the boundary has checked its types."""
    obj = subject.obj
    assert isinstance(obj, dict)
    metadata = obj.get("metadata") or {}
    namespace = subject.namespace or str(metadata.get("namespace") or "")
    if subject.kind == "Pod":
        builder = PatchBuilder(obj)
        pod, base = obj, ""
    else:
        builder = PatchBuilder(obj).scoped(("spec", "template"))
        pod, base = (obj.get("spec") or {}).get("template") or {}, "spec.template"
    metadata = pod.get("metadata") or {}
    role = classify(metadata, namespace, policy, own_namespace)
    return PodTarget(subject.kind, namespace, metadata, pod.get("spec") or {}, builder, role, base)


__all__ = ["BadObject", "Context", "PodTarget", "denial_message", "mutate", "validate"]


def _run(ctx: Context, rule: Callable[[Context, Any], None], target: Any) -> bool:
    """Run one rule. Unreadable cluster state follows `onLookupFailure`; a rule that raises is a bug: logged,
    recorded for the metric, its mutation discarded whole, and in validation a finding (fail closed).
    True when the rule completed."""
    try:
        rule(ctx, target)
    except LookupFailed as exc:
        _fail(ctx, f"cluster state unavailable: {exc}")
        return False
    except Exception as exc:  # a broken rule must not become a 5xx for the API server
        name = f"{getattr(rule, '__module__', 'rules')}.{getattr(rule, '__name__', 'rule')}"
        log.exception("rule %s failed", name)
        ctx.decision.rule_errors.append(name)
        why = f"internal error in {name}: {type(exc).__name__}"
        ctx.decision.audit["rule-error"] = why
        if rule in MUTATORS.values():
            ctx.warn(f"storage-affinity-webhook admitted this unchanged: {why}")
        else:
            ctx.find("", f"{why}: the object could not be checked", RULE_ERROR)
        return False
    return True


def _fail(ctx: Context, why: str) -> None:
    decision = ctx.decision
    decision.failure = why
    decision.audit["lookup-failure"] = why
    if ctx.policy.on_lookup_failure == "deny":
        decision.denied_by_failure = True
    else:
        ctx.warn(f"storage-affinity-webhook admitted this unchanged: {why}")


def _apply_enforcement(ctx: Context) -> None:
    findings = []
    for found in ctx.decision.findings:
        relaxed = ctx.policy.enforcement_for(found.family) == "warn" and found.family not in STRICT_FAMILIES
        if found.severity is Severity.DENY and relaxed:
            found = Finding(found.field, found.message, found.family, Severity.WARN)  # noqa: PLW2901
        findings.append(found)
    ctx.decision.findings = findings
    for finding in findings:
        if finding.severity is Severity.WARN:
            ctx.warn(finding.text())


#: Bounds of a denial message: hostile input (100,000 bad list items, a 1 MB key) must not make a megabyte answer.
FIELD_LIMIT = 400  # a valid annotation key is at most 317 characters
FINDING_TEXT_LIMIT = 1000
DENIAL_MESSAGE_LIMIT = 8192


def denial_message(findings: Sequence[Finding]) -> str:
    """DESIGN §6: every finding in one message, numbered, each with its field path — up to a size bound, after
    which the rest are counted, not listed."""
    count = len(findings)
    noun = "problem" if count == 1 else "problems"
    message = f"storage-affinity-webhook denied: {count} {noun}: "
    for i, found in enumerate(findings, 1):
        text = f"{clip(found.field, FIELD_LIMIT)}: {found.message}" if found.field else found.message
        item = f"({i}) {clip(text, FINDING_TEXT_LIMIT)}"
        if i > 1 and len(message) + len(item) > DENIAL_MESSAGE_LIMIT:
            return escaped(message + f"; and {count - i + 1} more (fix these first)")
        message += item if i == 1 else "; " + item
    return escaped(message)


# --- the rules shipped with the foundation --------------------------------------------------------------------


def own_annotations(ctx: Context, target: PodTarget) -> None:
    """Unknown `storage-affinity.io/*` keys and bad values; on UPDATE only when they changed."""
    annotations = target.metadata.get("annotations") or {}
    if ctx.subject.operation == "UPDATE":
        old = ((ctx.subject.old or {}).get("metadata") or {}).get("annotations") or {}
        annotations = {k: v for k, v in annotations.items() if old.get(k) != v}
    for path, message in annotation_problems(annotations, target.field("metadata.annotations")):
        ctx.find(path, message, "annotations")


def policy_config_map(ctx: Context, config_map: Json) -> None:
    """A policy ConfigMap that would not load is denied, so a broken policy never lands."""
    labels = (config_map.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, Mapping) or labels.get(POLICY_LABEL) != "true":
        return
    try:
        policy_from_config_map(config_map)
    except PolicyError as exc:
        for path, message in exc.problems:
            ctx.find(path, message, "policy")


POD_VALIDATORS.append(own_annotations)
CONFIG_MAP_VALIDATORS.append(policy_config_map)

# --- co-scheduling of data movers (issue 3) ---------------------------------------------------------------------
from rules import coschedule, coschedule_check  # noqa: E402  (rule modules import rules.context, never this)

MUTATORS["mover"] = coschedule.mutate_mover
POD_VALIDATORS.append(coschedule_check.check_co_scheduling)

# --- load affinity for backup and restore pods (issue 4) ------------------------------------------------------
from rules import loadaffinity, loadaffinity_validation  # noqa: E402

MUTATORS["backup"] = loadaffinity.mutate_backup
MUTATORS["restore"] = loadaffinity.mutate_restore
POD_VALIDATORS.append(loadaffinity_validation.load_affinity_annotations)
CONFIG_MAP_VALIDATORS.append(loadaffinity_validation.velero_config_map)
CONFIG_MAP_VALIDATORS.append(loadaffinity_validation.policy_config_map_cluster)

# --- validation: disk annotations and placement consistency (issue 5) -----------------------------------------
from rules import disk, placement  # noqa: E402  (registered after the pipeline they plug into exists)

POD_VALIDATORS.append(disk.disk_annotations)
POD_VALIDATORS.append(placement.placement_consistency)
