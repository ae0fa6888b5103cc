"""Which Kubernetes API settings `serve` will use, decided without importing the client.

The CLI checks this in gunicorn's master process, which must not import urllib3/ssl users before the gevent
workers monkey-patch them; each worker then loads the settings itself (`webhook.state.live.load_configuration`).
"""

from __future__ import annotations

import os
from pathlib import Path


class ApiConfigError(ValueError):
    """No usable connection settings for the Kubernetes API."""


def api_source(kubeconfig: Path | None = None) -> tuple[str, Path | None]:
    """Like controller-runtime: --kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config → (kind, file)."""
    if kubeconfig is not None:
        if not kubeconfig.is_file():
            raise ApiConfigError(f"cannot load the Kubernetes API settings: --kubeconfig {kubeconfig}: no such file")
        return "kubeconfig", kubeconfig
    if os.environ.get("KUBECONFIG"):
        return "$KUBECONFIG", None
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "in-cluster", None
    default = Path("~/.kube/config").expanduser()
    if default.is_file():
        return "kubeconfig", default
    raise ApiConfigError(
        "no Kubernetes API to read live state from: not in a cluster, no --kubeconfig, no $KUBECONFIG "
        "and no ~/.kube/config; pass --kubeconfig PATH, or --cluster FILE... for static state"
    )
