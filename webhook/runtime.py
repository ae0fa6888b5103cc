"""What a server process holds while it runs: the policy in effect, the cluster view, readiness checks.

The policy is swapped atomically (one attribute assignment), so a request always sees one whole policy. While
`policy_missing` says why no valid policy is in effect (a policy ConfigMap not read yet, or invalid with no earlier
valid one), reviews are refused with 503 rather than decided by a policy the operator did not choose.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from certs.files import read_not_after
from rules.cluster import ClusterView
from rules.policy import Policy, PolicyError

log = logging.getLogger(__name__)

ReadinessCheck = Callable[[], str | None]  # None when ready, else what is missing


@dataclass
class Runtime:
    """What one worker decides with: the policy in effect (or why there is none), the cluster view and the
    readiness checks. The app reads it on every request; the state's watches update it in place."""

    policy: Policy
    view: ClusterView
    namespace: str = ""
    cert_file: Path | None = None
    policy_source: str = "embedded default"
    policy_problems: list[str] = field(default_factory=list)
    checks: dict[str, ReadinessCheck] = field(default_factory=dict)
    policy_missing: str | None = None  # why no valid policy is in effect; `policy` is then not used
    loaded_check: Callable[[], bool] | None = None  # the initial lists have landed (None: nothing to load)
    #: Entered around each review: the live state bounds the API calls one review makes (webhook/state/live.py).
    review_scope: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext
    _cert_checked: float = 0.0
    _cert_error: str | None = None

    def set_policy(self, policy: Policy, source: str) -> None:
        self.policy = policy
        self.policy_source = source
        self.policy_problems = []
        self.policy_missing = None

    def lack_policy(self, why: str) -> None:
        """No valid policy is in effect: /readyz fails and reviews get 503 with `why`."""
        self.policy_missing = why

    def reject_policy(self, error: PolicyError) -> None:
        """Keep the last good policy; remember why the new one was refused (shown in /readyz)."""
        self.policy_problems = [f"{p}: {m}" if p else m for p, m in error.problems]
        if self.policy_missing is None:
            log.error("policy refused, keeping the last good one: %s", error)
        else:
            log.error("policy refused, and no valid policy is in effect: %s", error)

    def loaded(self) -> bool:
        """Whether the state and policy a review needs have been read once (a worker accepts no review before)."""
        return self.loaded_check is None or self.loaded_check()

    def unavailable(self) -> str | None:
        """Why reviews cannot be answered now (HTTP 503), or None."""
        if self.policy_missing is None:
            return None
        return f"storage-affinity-webhook has no valid policy: {self.policy_missing}"

    def readiness(self) -> dict[str, str]:
        """Each check's state ('ok' or what is missing)."""
        refused = "; ".join(self.policy_problems)[:500]
        if self.policy_missing is not None:
            states = {
                "policy": f"no valid policy: {self.policy_missing}" + (f"; refused: {refused}" if refused else "")
            }
        else:
            states = {"policy": f"ok ({self.policy_source})" + (f"; last change refused: {refused}" if refused else "")}
        for name, check in self.checks.items():
            states[name] = check() or "ok"
        states["certificate"] = self._certificate_state() or "ok"
        return states

    def ready(self) -> bool:
        return all(state.startswith("ok") for state in self.readiness().values())

    def _certificate_state(self) -> str | None:
        if self.cert_file is None:
            return None
        now = time.monotonic()
        if now - self._cert_checked > 5:
            self._cert_checked = now
            try:
                not_after = read_not_after(self.cert_file)
            except (OSError, ValueError) as exc:
                self._cert_error = f"serving certificate unreadable: {exc}"
            else:
                from webhook.metrics import CERT_EXPIRY

                CERT_EXPIRY.set(not_after.timestamp())
                remaining = not_after.timestamp() - time.time()
                self._cert_error = None if remaining > 0 else f"serving certificate expired at {not_after.isoformat()}"
        return self._cert_error
