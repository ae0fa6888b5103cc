"""Which role a pod plays: skipped, explicit annotation, then policy selectors; first match wins
(docs/design.md#2-pod-roles)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rules.kube.selectors import selector_matches
from rules.memo import Latest
from rules.model import PREFIX, Json
from rules.policy import ROLES, Policy
from rules.quoting import clip

ROLE_ANNOTATION = PREFIX + "role"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
KUBEVIRT_EPHEMERAL = "kubevirt.io/ephemeral-provisioning"
#: The roles whose grants reach beyond the namespace's own objects (the operator's tolerations and nodes), so they
#: apply only where the policy's `trust` says. A mover is placed only by pods of its own namespace: it needs none.
GRANTING_ROLES = ("backup", "restore")


@dataclass(frozen=True)
class RoleDecision:
    role: str | None
    reason: str
    #: Skipped entirely (excluded namespace, mirror pod): not even validated.
    exempt: bool = False
    #: Validated but never placed by any rule: `role: none`, and KubeVirt's first-consumer pods, which pick the
    #: node for a WaitForFirstConsumer disk on purpose.
    unplaced: bool = False
    #: False for a granting role claimed where the policy's `trust` does not trust it: it gets none of its grants.
    trusted: bool = True


#: The answers that quote nothing of the pod, made once: a RoleDecision is frozen, so every review can share them.
_MIRROR = RoleDecision(None, "mirror pod (managed by the kubelet)", exempt=True)
_EXPLICIT_NONE = RoleDecision(None, f"annotation {ROLE_ANNOTATION}: none", unplaced=True)
_FIRST_CONSUMER = RoleDecision(
    None, "KubeVirt first-consumer pod: it must be scheduled freely to pick the node", unplaced=True
)
_EXPLICIT = {role: RoleDecision(role, f"annotation {ROLE_ANNOTATION}: {role}") for role in ROLES}
_UNMATCHED = RoleDecision(None, "no role matches")


def classify(
    metadata: Mapping[str, Any],
    namespace: str,
    policy: Policy,
    own_namespace: str = "",
    requester: str | None = None,
    *,
    kind: str = "Pod",
) -> RoleDecision:
    """The role of a pod, or of the pods a workload of `kind` will have. `requester` is who asks the API server
    for the object: it is who creates a Pod, but a workload's pods are created by its controller, so requester
    trust (`trust.requesters`) counts for a Pod alone."""
    if kind != "Pod":
        requester = None
    if namespace and (namespace in policy.excluded_namespaces or namespace == own_namespace):
        return RoleDecision(None, f"namespace {namespace} is excluded", exempt=True)
    annotations = metadata.get("annotations")
    if annotations:
        if MIRROR_ANNOTATION in annotations:
            return _MIRROR
        explicit = annotations.get(ROLE_ANNOTATION)
        if explicit == "none":
            return _EXPLICIT_NONE
        if annotations.get(KUBEVIRT_EPHEMERAL) == "true":
            return _FIRST_CONSUMER
        if explicit in ROLES:
            return _judged(_EXPLICIT[explicit], namespace, policy, requester)
    labels = metadata.get("labels") or {}
    for selector in _selectors(policy.role_selectors):
        if (selector.key is None or labels.get(selector.key) == selector.value) and selector_matches(
            selector.selector, labels
        ):
            return _judged(selector.found, namespace, policy, requester)
    return _UNMATCHED


@dataclass(frozen=True)
class _Selector:
    """A role selector of the policy, with the answer it gives and its first `matchLabels` pair (`key` None when
    it has none): a pod that lacks that label is passed over with one lookup, as most pods are by every selector,
    before `selector_matches` checks the whole selector."""

    selector: Json
    found: RoleDecision
    key: str | None
    value: object


def _compiled(role_selectors: Mapping[str, tuple[Json, ...]]) -> tuple[_Selector, ...]:
    """The policy's role selectors in the order they are tried: by role (ROLES' order), then as listed."""
    return tuple(
        _Selector(selector, RoleDecision(role, f"labels match roles.{role}.selectors[{index}]"), *_first(selector))
        for role in ROLES
        for index, selector in enumerate(role_selectors.get(role, ()))
    )


_selectors = Latest(_compiled)


def _first(selector: Json) -> tuple[str | None, object]:
    for key, value in (selector.get("matchLabels") or {}).items():
        return key, value
    return None, None


def trusted(policy: Policy, namespace: str, requester: str | None) -> bool:
    """Whether the policy's `trust` covers an object of `namespace` created by `requester` (None: unknown)."""
    return namespace in policy.trusted_namespaces or (requester is not None and requester in policy.trust_requesters)


def _judged(decision: RoleDecision, namespace: str, policy: Policy, requester: str | None) -> RoleDecision:
    if decision.role not in GRANTING_ROLES or trusted(policy, namespace, requester):
        return decision
    return replace(decision, trusted=False)


def untrusted_role(
    decision: RoleDecision, namespace: str, requester: str | None, *, kind: str = "Pod", policy: Policy | None = None
) -> str:
    """The warning and finding for a granting role claimed where it is not trusted: the role, where, and the
    setting that would trust it. A workload from a requester the policy trusts is told why that is not enough:
    its controller, not that requester, creates its pods."""
    if kind != "Pod" and requester and policy is not None and requester in policy.trust_requesters:
        return (
            f"role {decision.role} ({decision.reason}) is not trusted in namespace {namespace or '(none)'} for a "
            f"{clip(kind)}: its pods are created by its controller, not by requester {clip(requester)}, whom "
            "trust.requesters trusts for Pods only; none of its tolerations or placement applied (the policy's "
            "trust.namespaces trusts it)"
        )
    who = f" for requester {clip(requester)}" if requester else ""
    return (
        f"role {decision.role} ({decision.reason}) is not trusted in namespace {namespace or '(none)'}{who}: "
        "none of its tolerations or placement applied (the policy's trust.namespaces or trust.requesters trusts it)"
    )
