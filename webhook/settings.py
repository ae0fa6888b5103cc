"""Server settings, shared by the CLI, the gunicorn application and the tests; their defaults are the CLI's."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    """Everything `serve` was told, fixed before gunicorn forks: each worker builds its Runtime from these."""

    cert: Path
    key: Path
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
    live: bool = False  # read the cluster from the API (the CLI sets it when no --cluster is given)
    kubeconfig: Path | None = None
    policy_configmap: str = "storage-affinity-policy"
    lookup_timeout: float = 1.0
    start_timeout: float = 30.0  # a worker accepts once its state and policy are loaded, or after this long
    audit_interval: float = 300.0  # seconds between audits of the state the server holds; 0 turns it off
    replica_dir: Path | None = None  # shared by the workers of one server (`run` creates one): the policy in effect
    extra: dict[str, str] = field(default_factory=dict)


def default(name: str) -> object:
    """The default of a setting: the CLI shows and uses this one, so no default is written twice."""
    value = Settings.__dataclass_fields__[name].default
    assert not isinstance(value, type(MISSING)), name
    return value
