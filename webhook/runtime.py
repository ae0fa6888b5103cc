"""What a server process holds while it runs: the policy in effect, the cluster view, readiness checks.

The policy is swapped atomically (one attribute assignment), so a request always sees one whole policy.
"""

from __future__ import annotations

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
    policy: Policy
    view: ClusterView
    namespace: str = ""
    cert_file: Path | None = None
    policy_source: str = "embedded default"
    policy_problems: list[str] = field(default_factory=list)
    checks: dict[str, ReadinessCheck] = field(default_factory=dict)
    _cert_checked: float = 0.0
    _cert_error: str | None = None

    def set_policy(self, policy: Policy, source: str) -> None:
        self.policy = policy
        self.policy_source = source
        self.policy_problems = []

    def reject_policy(self, error: PolicyError) -> None:
        """Keep the last good policy; remember why the new one was refused (shown in /readyz)."""
        self.policy_problems = [f"{p}: {m}" if p else m for p, m in error.problems]
        log.error("policy refused, keeping the last good one: %s", error)

    def readiness(self) -> dict[str, str]:
        """Each check's state ('ok' or what is missing)."""
        states = {"policy": f"ok ({self.policy_source})"}
        if self.policy_problems:
            states["policy"] += f"; last change refused: {'; '.join(self.policy_problems)[:500]}"
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
