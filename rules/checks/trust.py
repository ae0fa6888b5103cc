"""The validating rule for roles claimed where the policy does not trust them (docs/design.md#2-pod-roles): a
backup or restore role outside `trust`, a CDI worker's labels on what CDI did not create. The mutating rules give
such a pod none of the role's grants; this finding (family `roleTrust`) makes the claim visible, and refuses it
where the policy's enforcement says so.
"""

from __future__ import annotations

from rules.context import Context, PodTarget
from rules.datasource.scope import cdi_trust_problem, filling_worker, untrusted_cdi_worker
from rules.roles import ROLE_ANNOTATION, untrusted_role

FAMILY = "roleTrust"


def role_trust(ctx: Context, target: PodTarget) -> None:
    """On creation only: an UPDATE never gives a grant (mutation is on CREATE), so it claims nothing."""
    if ctx.subject.operation != "CREATE":
        return
    role = target.role
    if role.role is not None and not role.trusted:
        explicit = (target.metadata.get("annotations") or {}).get(ROLE_ANNOTATION) == role.role
        at = f"metadata.annotations[{ROLE_ANNOTATION}]" if explicit else "metadata.labels"
        why = untrusted_role(role, target.namespace, ctx.subject.user, kind=target.kind, policy=ctx.policy)
        ctx.report(target.field(at), why, FAMILY)
        return
    component = filling_worker(target)
    if component is None or not ctx.policy.cdi_follow_vm or role.exempt:
        return
    if why := cdi_trust_problem(ctx.policy, target, ctx.subject.user):
        ctx.report(target.field("metadata.labels"), untrusted_cdi_worker(component, why), FAMILY)
