"""The production server: gunicorn with gevent workers over TLS.

Why gevent: kube-apiserver (Go net/http) keeps connections alive and parks idle spare ones. A thread-per-connection
worker (gunicorn `gthread`) blocks a thread on a connection that never sends a request, and with TLS the whole
pool stalls until the idle timeout (measured: 20 s under `hey`). A gevent worker costs one greenlet per idle
connection and keeps answering the others. The worker class (webhook/worker.py) also ends a shutdown as soon as
the requests in flight are answered, instead of waiting `graceful_timeout` for idle keep-alive connections.
"""

from __future__ import annotations

import logging
import os
import ssl
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from gunicorn.app.base import BaseApplication

from certs.reload import ReloadingServerContext
from webhook.arbiter import DrainingArbiter
from webhook.logs import configure_logging
from webhook.settings import Settings

log = logging.getLogger(__name__)

_TLS: dict[int, ReloadingServerContext] = {}


def _ssl_context(conf: Any, default_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """One reloading context per worker process: rotated certificate files are served without a restart."""
    pid = os.getpid()
    if pid not in _TLS:
        _TLS[pid] = ReloadingServerContext(conf.certfile, conf.keyfile)
    return _TLS[pid].context


def _child_exit(server: Any, worker: Any) -> None:
    from webhook.metrics import worker_exited

    worker_exited(worker.pid)


class WebhookServer(BaseApplication):  # type: ignore[misc]
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        super().__init__()

    def load_config(self) -> None:
        s = self.settings
        options = {
            "bind": [s.bind],
            "workers": s.workers,
            "worker_class": "webhook.worker.DrainingGeventWorker",
            "worker_connections": s.worker_connections,
            "certfile": str(s.cert),
            "keyfile": str(s.key),
            "ssl_context": _ssl_context,
            "keepalive": s.keepalive,
            "graceful_timeout": s.graceful_timeout,
            "timeout": 30,
            "child_exit": _child_exit,
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
        from webhook.bootstrap import build_app

        return build_app(self.settings)

    def run(self) -> None:
        """gunicorn's `BaseApplication.run`, with the master that resets no queued connection at shutdown."""
        try:
            DrainingArbiter(self).run()
        except RuntimeError as exc:
            print(f"\nError: {exc}\n", file=sys.stderr, flush=True)
            sys.exit(1)


def run(settings: Settings) -> None:
    """Serve until stopped. Metrics files go to a private directory shared by the workers."""
    configure_logging(settings.log_level)
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="storage-affinity-metrics-")
    WebhookServer(settings).run()
