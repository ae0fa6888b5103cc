"""The validating rule for policy ConfigMaps: one that would not load is denied, so a broken policy never lands
(whatever `enforcement` says: the pipeline never relaxes the `policy` family)."""

from __future__ import annotations

from rules.context import Context
from rules.model import Json
from rules.policy import POLICY_LABEL, PolicyError, is_policy_config_map, policy_from_config_map

FAMILY = "policy"


def policy_config_map(ctx: Context, config_map: Json) -> None:
    if not is_policy_config_map(config_map):
        return
    ctx.reason(f"policy ConfigMap (label {POLICY_LABEL}=true): checked as the webhook loads it")
    try:
        policy_from_config_map(config_map)
    except PolicyError as exc:
        for path, message in exc.problems:
            ctx.report(path, message, FAMILY)
