"""Which role a pod plays: skipped, explicit annotation, then policy selectors; first match wins
(docs/design.md#2-pod-roles)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rules.kube.selectors import selector_matches
from rules.model import PREFIX
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


def classify(
    metadata: Mapping[str, Any],
    namespace: str,
    policy: Policy,
    own_namespace: str = "",
    requester: str | None = None,
) -> RoleDecision:
    annotations = metadata.get("annotations") or {}
    labels = metadata.get("labels") or {}
    if namespace and (namespace in policy.excluded_namespaces or namespace == own_namespace):
        return RoleDecision(None, f"namespace {namespace} is excluded", exempt=True)
    if MIRROR_ANNOTATION in annotations:
        return RoleDecision(None, "mirror pod (managed by the kubelet)", exempt=True)
    explicit = annotations.get(ROLE_ANNOTATION)
    if explicit == "none":
        return RoleDecision(None, f"annotation {ROLE_ANNOTATION}: none", unplaced=True)
    if annotations.get(KUBEVIRT_EPHEMERAL) == "true":
        return RoleDecision(
            None, "KubeVirt first-consumer pod: it must be scheduled freely to pick the node", unplaced=True
        )
    if explicit in ROLES:
        return _judged(
            RoleDecision(explicit, f"annotation {ROLE_ANNOTATION}: {explicit}"), namespace, policy, requester
        )
    for role in ROLES:
        for index, selector in enumerate(policy.role_selectors.get(role, ())):
            if selector_matches(selector, labels):
                found = RoleDecision(role, f"labels match roles.{role}.selectors[{index}]")
                return _judged(found, namespace, policy, requester)
    return RoleDecision(None, "no role matches")


def trusted(policy: Policy, namespace: str, requester: str | None) -> bool:
    """Whether the policy's `trust` covers an object of `namespace` created by `requester` (None: unknown)."""
    return namespace in policy.trusted_namespaces or (requester is not None and requester in policy.trust_requesters)


def _judged(decision: RoleDecision, namespace: str, policy: Policy, requester: str | None) -> RoleDecision:
    if decision.role not in GRANTING_ROLES or trusted(policy, namespace, requester):
        return decision
    return replace(decision, trusted=False)


def untrusted_role(decision: RoleDecision, namespace: str, requester: str | None) -> str:
    """The warning and finding for a granting role claimed where it is not trusted: the role, where, and the
    setting that would trust it."""
    who = f" for requester {clip(requester)}" if requester else ""
    return (
        f"role {decision.role} ({decision.reason}) is not trusted in namespace {namespace or '(none)'}{who}: "
        "none of its tolerations or placement applied (the policy's trust.namespaces or trust.requesters trusts it)"
    )
