"""Which role a pod plays: skipped, explicit annotation, then policy selectors; first match wins
(docs/design.md#2-pod-roles)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rules.kube.selectors import selector_matches
from rules.model import PREFIX
from rules.policy import ROLES, Policy

ROLE_ANNOTATION = PREFIX + "role"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
KUBEVIRT_EPHEMERAL = "kubevirt.io/ephemeral-provisioning"


@dataclass(frozen=True)
class RoleDecision:
    role: str | None
    reason: str
    #: Skipped entirely (excluded namespace, mirror pod): not even validated.
    exempt: bool = False
    #: Validated but never placed by any rule: `role: none`, and KubeVirt's first-consumer pods, which pick the
    #: node for a WaitForFirstConsumer disk on purpose.
    unplaced: bool = False


def classify(metadata: Mapping[str, Any], namespace: str, policy: Policy, own_namespace: str = "") -> RoleDecision:
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
        return RoleDecision(explicit, f"annotation {ROLE_ANNOTATION}: {explicit}")
    for role in ROLES:
        for index, selector in enumerate(policy.role_selectors.get(role, ())):
            if selector_matches(selector, labels):
                return RoleDecision(role, f"labels match roles.{role}.selectors[{index}]")
    return RoleDecision(None, "no role matches")
