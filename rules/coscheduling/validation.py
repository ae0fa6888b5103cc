"""The validating side of co-scheduling, for mover Pods and Jobs at CREATE, on the final object: what the mutating rule
could not fix is reported here, naming the pods and nodes involved (docs/design.md#4-co-scheduling-movers and
the placement consistency of docs/design.md#6-validation)."""

from __future__ import annotations

from rules.context import Context, PodTarget
from rules.coscheduling.anchors import COPY_METHOD_HINT, plan
from rules.coscheduling.claimpods import name_of
from rules.kube.workloads import POD_KINDS
from rules.model import Severity

FAMILY = "coScheduling"


def check_co_scheduling(ctx: Context, target: PodTarget) -> None:
    if target.kind not in POD_KINDS or ctx.subject.operation != "CREATE" or target.role.role != "mover":
        return
    result = plan(ctx.view, ctx.policy, target)
    for problem in result.problems:
        ctx.report(problem.field, problem.message, FAMILY, problem.severity)
    pinned = target.spec.get("nodeName")
    if not pinned or result.problems:
        return
    for hold in result.anchored:
        if hold.node != pinned and not hold.split:
            message = (
                f"ReadWriteOnce claim {hold.claim} is in use by pod {name_of(hold.anchor or {})} on node {hold.node}, "
                f"but spec.nodeName pins this pod to node {pinned}, where it cannot mount it: remove spec.nodeName "
                f"to let the webhook co-schedule it, or {COPY_METHOD_HINT}"
            )
            ctx.report(target.field(hold.volume.field), message, FAMILY, Severity.DENY)
