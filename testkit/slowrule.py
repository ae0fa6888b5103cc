"""`python -m testkit.slowrule serve ...`: the real server with one rule more, in both webhooks, that spends the CPU
time a pod's label asks for: what a review that would run for seconds does to the server and to the reviews and
probes beside it, without depending on which crafted object is still slow.

A pod labelled `SPIN_LABEL: "<ms>"` costs that many milliseconds of CPU time in each webhook, checking the review
deadline (rules/deadline.py) as every rule's loops do; `"forever"` runs until the deadline stops it. Any other pod
costs the rule one dictionary lookup. The rule is added before gunicorn forks its workers, which inherit it.
"""

from __future__ import annotations

import sys
import time

from rules import deadline, registry
from rules.context import Context, PodTarget

SPIN_LABEL = "testkit.storage-affinity.io/spin"
FOREVER = "forever"


def spin(ctx: Context, target: PodTarget) -> None:
    """Spend the CPU time the pod's label asks for, checking the deadline as a rule's loop does."""
    asked = (target.metadata.get("labels") or {}).get(SPIN_LABEL)
    if asked is None:
        return
    ends = float("inf") if asked == FOREVER else time.thread_time() + float(asked) / 1000
    while time.thread_time() < ends:
        deadline.check()


def install() -> None:
    """The rule, last in both webhooks' pod rules (the mutation's after every rule that patches)."""
    registry.POD_MUTATORS.append(spin)
    registry.POD_VALIDATORS.append(spin)


def main(argv: list[str] | None = None) -> int:
    from webhook.cli.main import main as webhook_main

    install()
    return webhook_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    raise SystemExit(main())
