"""The production server: gunicorn with gevent workers over TLS.

Why gevent: kube-apiserver (Go net/http) keeps connections alive and parks idle spare ones. A thread-per-connection
worker (gunicorn `gthread`) blocks a thread on a connection that never sends a request, and with TLS the whole
pool stalls until the idle timeout (measured: 20 s under `hey`). A gevent worker costs one greenlet per idle
connection and keeps answering the others. The worker class (webhook/serving/worker.py) also ends a shutdown as soon as
the requests in flight are answered, instead of waiting `graceful_timeout` for idle keep-alive connections, and
accepts no connection before its cluster state and policy are loaded (`WebhookServer.loaded`): the workers share
the listening socket, so a restarted worker leaves every review to its siblings until it can decide like them.
"""

from __future__ import annotations

import logging
import os
import shutil
import ssl
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gunicorn.app.base import BaseApplication

from certs.reload import ReloadingServerContext
from webhook.logs import configure_logging
from webhook.serving.arbiter import DrainingArbiter
from webhook.settings import Settings

if TYPE_CHECKING:
    from webhook.runtime import Runtime

log = logging.getLogger(__name__)

_TLS: dict[int, ReloadingServerContext] = {}


def _ssl_context_factory(client_ca: Path | None) -> Callable[[Any, Callable[[], ssl.SSLContext]], ssl.SSLContext]:
    """gunicorn's `ssl_context` hook: one reloading context per worker process, so rotated certificate files (and
    client CA file) are served without a restart."""

    def ssl_context(conf: Any, default_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        pid = os.getpid()
        if pid not in _TLS:
            _TLS[pid] = ReloadingServerContext(conf.certfile, conf.keyfile, client_ca=client_ca)
        return _TLS[pid].context

    return ssl_context


def _client_authorities() -> tuple[Any, ...]:
    """The client CA file's certificates as this worker's TLS context holds them now (none before its first
    handshake: then no connection can have presented a certificate)."""
    tls = _TLS.get(os.getpid())
    return tls.client_authorities if tls is not None else ()


def _child_exit(server: Any, worker: Any) -> None:
    from webhook.metrics import worker_exited

    worker_exited(worker.pid)


def _worker_exit(server: Any, worker: Any) -> None:
    """In the worker, on its way out (SIGTERM included): a Lease it holds goes to a successor at once."""
    from webhook.audit.lease import release_all

    release_all()


class WebhookServer(BaseApplication):  # type: ignore[misc]
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.runtime: Runtime | None = None  # built in each worker by `load`
        super().__init__()

    def load_config(self) -> None:
        s = self.settings
        options = {
            "bind": [s.bind],
            "workers": s.workers,
            "worker_class": "webhook.serving.worker.DrainingGeventWorker",
            "worker_connections": s.worker_connections,
            "certfile": str(s.cert),
            "keyfile": str(s.key),
            "ssl_context": _ssl_context_factory(s.client_ca),
            "keepalive": s.keepalive,
            "graceful_timeout": s.graceful_timeout,
            "timeout": 30,
            "child_exit": _child_exit,
            "worker_exit": _worker_exit,
            "loglevel": s.log_level,
            "accesslog": None,
            "errorlog": "-",
            "limit_request_line": 8190,
            "proc_name": "storage-affinity-webhook",
        }
        if "control_socket_disable" in self.cfg.settings:  # gunicorn >= 25.1
            # No `gunicornc` control socket (worker count, reload, shutdown): Kubernetes manages the process, and
            # every server of a user would share one default path ($HOME/.gunicorn/gunicorn.ctl).
            options["control_socket_disable"] = True
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from webhook.app.endpoints import ENDPOINTS
        from webhook.serving.bootstrap import build_app
        from webhook.serving.clientauth import require_client_certificate

        app = build_app(self.settings)
        self.runtime = app.extensions["runtime"]
        if self.settings.client_ca is None:
            return app
        return require_client_certificate(
            app, {f"/{name}" for name in ENDPOINTS}, self.settings.client_names, _client_authorities
        )

    # What the worker asks before it accepts connections (webhook/serving/worker.py).

    @property
    def start_timeout(self) -> float:
        return self.settings.start_timeout

    def loaded(self) -> bool:
        return self.runtime is None or self.runtime.loaded()

    def not_ready(self) -> str:
        """What is not ready yet, for the log of a worker that stops waiting."""
        states = self.runtime.readiness() if self.runtime is not None else {}
        return "; ".join(f"{name}: {state}" for name, state in states.items() if not state.startswith("ok"))

    def run(self) -> None:
        """gunicorn's `BaseApplication.run`, with the master that resets no queued connection at shutdown."""
        try:
            DrainingArbiter(self).run()
        except RuntimeError as exc:
            print(f"\nError: {exc}\n", file=sys.stderr, flush=True)
            sys.exit(1)


def run(settings: Settings) -> None:
    """Serve until stopped. Metrics files and the policy in effect go to private directories shared by the
    workers, created before they are forked and removed when the server stops (normal exit, SIGTERM, SIGINT: the
    master leaves through `sys.exit`). A worker leaves through the same frames after its fork; only the master,
    which created them, removes them."""
    configure_logging(settings.log_level)
    created: list[str] = []
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        created.append(tempfile.mkdtemp(prefix="storage-affinity-metrics-"))
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = created[-1]
    if settings.live and settings.replica_dir is None:
        created.append(tempfile.mkdtemp(prefix="storage-affinity-replica-"))
        settings = replace(settings, replica_dir=Path(created[-1]))
    master = os.getpid()
    try:
        WebhookServer(settings).run()
    finally:
        if os.getpid() == master:
            for directory in created:
                shutil.rmtree(directory, ignore_errors=True)
