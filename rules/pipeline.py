"""The admission engine: the typed boundary, then the rules of rules/registry.py, then enforcement.

Rules are plain functions `(ctx, target) -> None` that write to `target.patch` and report through `ctx`. A rule
never escapes: unreadable cluster state follows the policy's `onLookupFailure`; a rule that raises is a bug whose
mutation is discarded whole (never a half-applied change) and whose validation fails closed.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonpatch

from rules import budget, deadline, registry
from rules.budget import OverBudget
from rules.cluster import ClusterView, LookupFailed
from rules.context import BadObject, Context, PodTarget
from rules.deadline import PastDeadline
from rules.kube.shapes import object_problems, well_formed
from rules.kube.workloads import POD_KINDS, TEMPLATE_PATHS, template_of, template_spec
from rules.model import Decision, Finding, Json, Severity, Subject
from rules.patch import PatchBuilder
from rules.policy import Policy
from rules.roles import classify

log = logging.getLogger(__name__)

#: The kinds `validate` has rules for: any other is admitted unchecked (and `review` says so).
VALIDATED_KINDS = ("Pod", "ConfigMap", *TEMPLATE_PATHS)
#: Finding families that enforcement never relaxes: a broken policy must never land, and an object whose values
#: no rule can read (the API server would refuse it too) is never admitted unchecked.
STRICT_FAMILIES = frozenset({"policy", "object"})
#: The family of a rule that raised. It follows the policy's global `enforcement`: with `deny` (the default) a
#: validation that could not be computed denies (fail closed); an operator who chose `warn` gets a warning.
RULE_ERROR = "internal"
#: The audit annotation of a review whose rules ran past the review deadline (rules/deadline.py); one past a
#: limit of the budget has `over-budget`.
PAST_DEADLINE = "past-deadline"


def mutate(subject: Subject, view: ClusterView, policy: Policy, own_namespace: str = "") -> Decision:
    """The mutating webhook's decision: patch operations only on CREATE of a Pod or Job. Its rules, the typed
    boundary included, run under one review deadline (rules/deadline.py): past it, the object is answered as one
    past the budget, and nothing of the mutation is applied."""
    ctx = Context(subject, view, policy, own_namespace)
    with deadline.running():
        try:
            _mutate(ctx)
        except PastDeadline as exc:  # outside a rule: the boundary, the role or the workload's template
            _over_budget(ctx, exc, mutating=True)
    return ctx.decision


def _mutate(ctx: Context) -> None:
    subject, policy, own_namespace = ctx.subject, ctx.policy, ctx.own_namespace
    if subject.kind in POD_KINDS and subject.operation != "CREATE":
        ctx.reason(f"operation {subject.operation} is not mutated: only CREATE is")
    if subject.operation != "CREATE" or subject.kind not in POD_KINDS or not isinstance(subject.obj, dict):
        return
    if not _checked(ctx, mutating=True):
        return
    target = pod_target(subject, policy, own_namespace)
    ctx.reason(f"role: {target.role.role or 'none'} ({target.role.reason})")
    ctx.decision.role = target.role
    if target.role.exempt:  # an excluded namespace, a mirror pod: no rule may change it
        return
    mutator = registry.MUTATORS.get(target.role.role or "")
    if mutator is not None and not _run(ctx, mutator, target, mutating=True):
        return
    for rule in registry.POD_MUTATORS:
        if not _run(ctx, rule, target, mutating=True):
            return
    if target.patch.written:
        ctx.decision.patch = target.patch.operations()


def validate(
    subject: Subject, view: ClusterView, policy: Policy, own_namespace: str = "", *, existing: bool = False
) -> Decision:
    """The validating webhook's decision: findings with enforcement applied. `existing` (the audit): the object is
    stored already, so a workload's pods have been created or come later, and its template is checked as a changed
    one is, by the template rules (a Job's pods are audited as Pods). Its rules run under their own review
    deadline, as the mutation's do."""
    ctx = Context(subject, view, policy, own_namespace)
    with deadline.running():
        try:
            _validate(ctx, existing=existing)
        except PastDeadline as exc:  # outside a rule: the boundary, the role or the workload's template
            _over_budget(ctx, exc, mutating=False)
    _apply_enforcement(ctx)
    return ctx.decision


def _validate(ctx: Context, *, existing: bool) -> None:
    subject, policy, own_namespace = ctx.subject, ctx.policy, ctx.own_namespace
    if subject.operation not in ("CREATE", "UPDATE"):
        ctx.reason(f"operation {subject.operation} is not checked: only CREATE and UPDATE are")
    if not isinstance(subject.obj, dict) or subject.operation not in ("CREATE", "UPDATE"):
        return
    path = TEMPLATE_PATHS.get(subject.kind)
    updated = existing and path is not None  # a template checked whole, as the pods it will create are
    if path is not None and subject.operation == "UPDATE":
        if template_of(subject.obj, path) == template_of(subject.old, path):
            # Scaling, a status or a label of the workload: no new pod comes from this, so nothing to check.
            ctx.reason("pod template unchanged")
            return
        updated = True
    if not _checked(ctx):
        return
    if subject.kind == "Pod" or path is not None:
        target = pod_target(subject, policy, own_namespace)
        if target.role.exempt:
            ctx.reason(f"exempt: {target.role.reason}")
            return
        rule_ctx = ctx
        validators = registry.POD_VALIDATORS if subject.kind in POD_KINDS else registry.TEMPLATE_VALIDATORS
        if updated:
            # A changed template is checked whole, as the pods it will create are: to the rules it is a creation.
            rule_ctx = dataclasses.replace(ctx, subject=dataclasses.replace(subject, operation="CREATE", old=None))
            validators = registry.TEMPLATE_VALIDATORS
        for rule in validators:
            if not _run(rule_ctx, rule, target) and ctx.decision.over_budget is not None:
                break  # answered at once: no further rule spends on an object past a limit
    elif subject.kind == "ConfigMap":
        for cm_rule in registry.CONFIG_MAP_VALIDATORS:
            if not _run(ctx, cm_rule, subject.obj) and ctx.decision.over_budget is not None:
                break
        if not ctx.decision.reasons:  # each rule says which ConfigMap it checks it as
            ctx.reason("not a policy or Velero node-agent ConfigMap: no rule checks it")


@dataclass(frozen=True)
class Chain:
    """Both webhooks on one object, as the API server chains them: the mutation, the object with its patch
    applied, and the validation of that object."""

    mutation: Decision
    final: Json | None
    validation: Decision


def mutate_then_validate(
    subject: Subject,
    view: ClusterView,
    policy: Policy,
    own_namespace: str = "",
    *,
    between: Callable[[], None] | None = None,
) -> Chain:
    """What `review` and the audit both need; raises BadObject like `mutate` and `validate`. `between` is called
    after the mutation, outside both deadlines: where the in-server audit may hand the worker back."""
    mutation = mutate(subject, view, policy, own_namespace)
    if between is not None:
        between()
    final = subject.obj
    if mutation.patch and final is not None:
        final = jsonpatch.apply_patch(copy.deepcopy(final), mutation.patch)
    validation = validate(dataclasses.replace(subject, obj=final), view, policy, own_namespace)
    return Chain(mutation, final, validation)


def _checked(ctx: Context, *, mutating: bool = False) -> bool:
    """The typed boundary, before any rule: raises BadObject for mistyped fields (of the object, and of the old
    object that UPDATE rules compare with); a value no rule can digest is a finding, and no rule runs. An object
    past the review budget is answered at once too: the mutation leaves it unchanged with a warning, the
    validation reports it under the policy's enforcement."""
    subject = ctx.subject
    kind = subject.kind
    old = subject.old if subject.operation == "UPDATE" else None
    for source, value in (("object", subject.obj), ("oldObject", old)):
        if value is None or well_formed(kind, value):
            continue
        problems = object_problems(kind, value)
        if problems.types:
            raise BadObject(problems.types, source)
        for path, message in problems.values:
            ctx.report(path, message, "object")
        if source == "object":
            for path, message in problems.limits:
                _over_budget(ctx, OverBudget(message, path), mutating=mutating)
    decision = ctx.decision
    return not decision.findings and decision.over_budget is None


def pod_target(subject: Subject, policy: Policy, own_namespace: str) -> PodTarget:
    """The pod, or the pod template of a workload, under review, once the boundary has checked its types."""
    obj = subject.obj
    assert isinstance(obj, dict)
    kind = subject.kind
    if kind == "Pod":
        metadata = obj.get("metadata") or {}
        namespace = subject.namespace or str(metadata.get("namespace") or "")
        role = classify(metadata, namespace, policy, own_namespace, subject.user)
        return PodTarget(kind, namespace, metadata, obj.get("spec") or {}, PatchBuilder(obj), role)
    namespace = subject.namespace or str((obj.get("metadata") or {}).get("namespace") or "")
    path = TEMPLATE_PATHS[kind]
    pod = template_of(obj, path)
    metadata = pod.get("metadata") or {}
    role = classify(metadata, namespace, policy, own_namespace, subject.user, kind=kind)
    spec = template_spec(kind, obj, pod)
    return PodTarget(kind, namespace, metadata, spec, PatchBuilder(obj).scoped(path), role, ".".join(path))


__all__ = [
    "VALIDATED_KINDS",
    "BadObject",
    "Chain",
    "Context",
    "PodTarget",
    "mutate",
    "mutate_then_validate",
    "validate",
]


def _run(ctx: Context, rule: Callable[[Context, Any], None], target: Any, *, mutating: bool = False) -> bool:
    """Run one rule. Unreadable cluster state follows `onLookupFailure`; a rule that raises is a bug: logged,
    recorded for the metric, its mutation discarded whole, and in validation a finding (fail closed).
    True when the rule completed. The deadline is checked before each rule too, so that a rule whose loops do not
    check it still ends the review at the next rule."""
    try:
        deadline.check()
        rule(ctx, target)
    except LookupFailed as exc:
        _fail(ctx, f"cluster state unavailable: {exc}")
        return False
    except OverBudget as exc:
        _over_budget(ctx, exc, mutating=mutating)
        return False
    except Exception as exc:  # a broken rule must not become a 5xx for the API server
        name = f"{getattr(rule, '__module__', 'rules')}.{getattr(rule, '__name__', 'rule')}"
        log.exception("rule %s failed", name)
        ctx.decision.rule_errors.append(name)
        why = f"internal error in {name}: {type(exc).__name__}"
        ctx.audit("rule-error", why)
        if mutating:
            ctx.warn(f"storage-affinity-webhook admitted this unchanged: {why}")
        else:
            ctx.report("", f"{why}: the object could not be checked", RULE_ERROR)
        return False
    return True


def _over_budget(ctx: Context, exc: OverBudget, *, mutating: bool) -> None:
    """An object past a limit of rules/budget.py, a placement that would be, or rules past the review deadline:
    answered at once, naming the limit or the deadline. Nothing of the mutation is applied (the caller stops and
    drops the patch); the policy's global enforcement makes it a denial or, with `warn`, a warning (validation
    relaxes its findings itself). The audit annotation says which: `over-budget` or `past-deadline`."""
    past = isinstance(exc, PastDeadline)
    why = str(exc) if past else f"over the review budget: {exc}"
    where = f"{exc.field}: {why}" if exc.field else why
    ctx.decision.over_budget = where
    if mutating:  # what the rules before it recorded was not applied: the annotations must not say it was
        ctx.decision.audit.clear()
    ctx.audit(PAST_DEADLINE if past else "over-budget", where)
    if mutating and ctx.policy.enforcement_for(budget.FAMILY) == "warn":
        ctx.warn(f"storage-affinity-webhook admitted this unchanged: {where}")
    else:
        ctx.report(exc.field, why, budget.FAMILY)


def _fail(ctx: Context, why: str) -> None:
    decision = ctx.decision
    decision.failure = why
    ctx.audit("lookup-failure", why)
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
