"""The policy a server uses, read from the API: what `review --live` and the live `audit` judge by, so that neither
disagrees with the server it speaks for (a cluster's `trust.namespaces`, its load affinity, its enforcement)."""

from __future__ import annotations

from typing import Any

from rules.cluster import LookupFailed
from rules.policy import POLICY_LABEL, Policy, default_policy, is_policy_config_map, policy_from_config_map


class ClusterPolicyUnreadable(Exception):
    """The policy ConfigMap could not be read; the message names the call."""


def cluster_policy(view: Any, namespace: str, name: str) -> tuple[Policy, str]:
    """The policy the server in `namespace` reads, with where it came from: the ConfigMap `name` there when it
    carries the policy label, else the embedded default (a server without `--policy` falls back to it). An invalid
    ConfigMap raises PolicyError: the server keeps its last valid policy, which no API read shows."""
    where = f"ConfigMap {namespace}/{name}"
    try:
        config_map: dict[str, Any] | None = view.read_config_map(namespace, name)
    except LookupFailed as exc:
        raise ClusterPolicyUnreadable(f"cannot read the policy {where}: {exc}") from None
    if config_map is None:
        return default_policy(), f"embedded default (no {where})"
    if not is_policy_config_map(config_map):
        return default_policy(), f"embedded default ({where} lacks the label {POLICY_LABEL}=true)"
    return policy_from_config_map(config_map, where), where
