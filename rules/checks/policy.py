"""The validating rule for policy ConfigMaps: one that would not load is denied, so a broken policy never lands
(whatever `enforcement` says: the pipeline never relaxes the `policy` family)."""

from __future__ import annotations

from rules.context import Context
from rules.model import Json
from rules.policy import POLICY_LABEL, Policy, PolicyError, is_policy_config_map, policy_from_config_map

FAMILY = "policy"


def policy_config_map(ctx: Context, config_map: Json) -> None:
    if not is_policy_config_map(config_map):
        return
    ctx.reason(f"policy ConfigMap (label {POLICY_LABEL}=true): checked as the webhook loads it")
    loaded = loaded_policy(ctx, config_map)
    if isinstance(loaded, PolicyError):
        for path, message in loaded.problems:
            ctx.report(path, message, FAMILY)


def loaded_policy(ctx: Context, config_map: Json) -> Policy | PolicyError:
    """The policy the ConfigMap under review holds, or why it would not load: read once a review, though two rules
    ask (its schema check is most of a policy ConfigMap's review)."""

    def load() -> Policy | PolicyError:
        try:
            return policy_from_config_map(config_map)
        except PolicyError as exc:
            return exc

    return ctx.once(("policy ConfigMap", id(config_map)), load)
