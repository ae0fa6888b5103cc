"""Server settings, shared by the CLI, the gunicorn application and the tests; their defaults are the CLI's."""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from pathlib import Path

#: Seconds each API request of the CLI's live view (`review --live`) may take, from its start to its last byte.
CLI_REQUEST_TIMEOUT = 10.0
#: Seconds each page of a list the live `audit` reads may take, from its start to its last byte.
AUDIT_PAGE_TIMEOUT = 60.0


@dataclass(frozen=True)
class Settings:
    """Everything `serve` was told, fixed before gunicorn forks: each worker builds its Runtime from these."""

    cert: Path
    key: Path
    client_ca: Path | None = None  # reviews only for TLS clients with a certificate this CA signed (clientauth.py)
    client_names: tuple[str, ...] = ()  # and naming one of these (CN or DNS SAN): kube-apiserver's identity
    bind: str = "127.0.0.1:8443"
    workers: int = 1
    policy_file: Path | None = None
    cluster_files: tuple[Path, ...] = ()
    namespace: str = ""
    max_body: int = 4 * 1024 * 1024
    graceful_timeout: int = 25
    keepalive: int = 75
    worker_connections: int = 1000
    # Seconds a new connection has for its TLS handshake and first request's headers, and a request for its body.
    read_timeout: float = 10.0
    trivial_endpoint: bool = False
    log_level: str = "info"
    log_reviews: bool = False  # one info line per review answered (`make run`); off in the chart
    live: bool = False  # read the cluster from the API (the CLI sets it when no --cluster is given)
    kubeconfig: Path | None = None
    policy_configmap: str = "storage-affinity-policy"
    lookup_timeout: float = 1.0
    start_timeout: float = 30.0  # a worker accepts once its state and policy are loaded, or after this long
    audit_interval: float = 300.0  # seconds between audits of the state the server holds; 0 turns it off
    metrics_namespaces: bool = False  # the audit's findings on /metrics per namespace, not only per family
    replica_dir: Path | None = None  # shared by the workers of one server (`run` creates one): the policy in effect
    reports: str = "auto"  # the policy report API the audit writes: auto | openreports | wgpolicyk8s | off
    events: str = "on"  # Events on stuck storage pods and their owners, from the Lease holder: on | off
    lease_name: str = "storage-affinity-webhook"  # the Lease in `namespace` that picks the one writer
    lease_duration: float = 15.0
    lease_renew_deadline: float = 10.0
    lease_retry_period: float = 2.0

    @property
    def lease_timing(self) -> LeaseTiming:
        return LeaseTiming(self.lease_duration, self.lease_renew_deadline, self.lease_retry_period)


@dataclass(frozen=True)
class LeaseTiming:
    """Seconds: the lease a holder declares, how long it writes after its last successful renewal, how often
    every replica tries. `problem()` says why a combination cannot keep one writer."""

    duration: float
    renew_deadline: float
    retry_period: float

    def problem(self) -> str | None:
        if not 0 < self.retry_period < self.renew_deadline < self.duration:
            return (
                f"--lease-retry-period {self.retry_period:g} < --lease-renew-deadline {self.renew_deadline:g} "
                f"< --lease-duration {self.duration:g} is required (positive seconds)"
            )
        return None


def default(name: str) -> object:
    """The default of a setting: the CLI shows and uses this one, so no default is written twice."""
    value = Settings.__dataclass_fields__[name].default
    assert not isinstance(value, type(MISSING)), name
    return value
