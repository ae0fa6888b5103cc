"""Which Kubernetes API settings `serve` will use, and loading them.

The CLI checks `api_source` in gunicorn's master process, which must not import urllib3/ssl users before the
gevent workers monkey-patch them; each worker then loads the settings itself (`load_configuration`, which imports
the client only when called).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rules.safeload import unreadable


class ApiConfigError(ValueError):
    """No usable connection settings for the Kubernetes API."""


def api_source(kubeconfig: Path | None = None, *, live_state: bool = True) -> tuple[str, Path | None]:
    """Like controller-runtime: --kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config → (kind, file). Without
    any, the error offers `--cluster` (static state) only to a `live_state` command: `rotate-certs` has none."""
    if kubeconfig is not None:
        try:
            kubeconfig.open("rb").close()
        except OSError as exc:
            why = unreadable(str(kubeconfig), exc)
            raise ApiConfigError(f"cannot load the Kubernetes API settings: --kubeconfig {why}") from None
        return "kubeconfig", kubeconfig
    if os.environ.get("KUBECONFIG"):
        return "$KUBECONFIG", None
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "in-cluster", None
    default = Path("~/.kube/config").expanduser()
    if default.is_file():
        return "kubeconfig", default
    what, alternative = (
        ("read live state from", ", or --cluster FILE... for static state") if live_state else ("use", "")
    )
    raise ApiConfigError(
        f"no Kubernetes API to {what}: not in a cluster, no --kubeconfig, no $KUBECONFIG "
        f"and no ~/.kube/config; pass --kubeconfig PATH{alternative}"
    )


def load_configuration(kubeconfig: Path | None = None, *, live_state: bool = True) -> tuple[Any, str]:
    """The client's settings (a `kubernetes.client.Configuration`) from the source `api_source` picks, and a
    description of it for the log. The client is imported here, in a worker, never in the master (gevent)."""
    from kubernetes import client, config

    configuration = client.Configuration()
    kind, path = api_source(kubeconfig, live_state=live_state)
    try:
        if kind == "in-cluster":
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:  # a file, or $KUBECONFIG (possibly a list of files) left to the client to merge
            config_file = str(path) if path is not None else None
            config.load_kube_config(config_file=config_file, client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (config.ConfigException, OSError, ValueError, TypeError) as exc:
        raise ApiConfigError(f"cannot load the Kubernetes API settings ({kind}): {exc}") from None
    configuration.retries = False  # one attempt per call: the lookup budget and the watch loop decide on retries
    configuration.connection_pool_maxsize = 16
    return configuration, f"{kind} {path}" if path is not None else kind
