"""Certificate mode `self`: how `serve` runs the rotation of its own CA and serving certificate.

What the rotation does (issue, store in the Secret, publish the caBundle, write the files) is `certs.rotation`,
which knows nothing of the server; this module is only the process around it: its arguments and its lifetime.

The rotation runs in its own process (`storage-affinity-webhook rotate-certs`), not in gunicorn's master: the
master must not import the kubernetes client (and with it ssl/urllib3) before gevent patches the workers it forks.
`serve` runs one reconcile first, so the files exist before any worker loads them, then keeps the rotator running
beside the server; the workers' reloading TLS context picks up what it writes.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cert-dir", type=Path, required=True, help="where tls.crt, tls.key and ca.crt are written")
    parser.add_argument("--cert-secret", required=True, help="the Secret holding the CA and serving certificate")
    parser.add_argument("--service", required=True, help="the webhook Service (the certificate's SANs)")
    parser.add_argument("--mutating-webhook", help="MutatingWebhookConfiguration whose caBundle is kept current")
    parser.add_argument("--validating-webhook", help="ValidatingWebhookConfiguration whose caBundle is kept current")


def rotator_command(args: argparse.Namespace, *, once: bool) -> list[str]:
    """The `rotate-certs` command line for the settings `serve` was given."""
    command = [
        sys.executable,
        "-m",
        "webhook",
        "rotate-certs",
        "--namespace",
        args.namespace,
        "--cert-dir",
        str(args.cert_dir),
        "--cert-secret",
        args.cert_secret,
        "--service",
        args.service,
    ]
    for flag in ("mutating_webhook", "validating_webhook", "kubeconfig"):
        if getattr(args, flag, None):
            command += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    return [*command, "--once"] if once else command


def start_rotator(args: argparse.Namespace) -> subprocess.Popen[bytes]:
    """Reconcile once (fails fast: no certificate, no server), then keep rotating in the background."""
    subprocess.run(rotator_command(args, once=True), check=True)
    return subprocess.Popen(rotator_command(args, once=False))


def rotate(args: argparse.Namespace) -> int:
    """The `rotate-certs` command: one reconcile with `--once`, else reconcile until SIGTERM."""
    from kubernetes import client

    from certs.rotation import CertificateRotator, KubeApi, RotationSettings
    from webhook.state.apisource import load_configuration

    configuration, _ = load_configuration(args.kubeconfig, live_state=False)
    settings = RotationSettings(
        namespace=args.namespace,
        secret_name=args.cert_secret,
        service=args.service,
        mutating_webhook=args.mutating_webhook,
        validating_webhook=args.validating_webhook,
        out_dir=args.cert_dir,
    )
    rotator = CertificateRotator(settings, KubeApi(client.ApiClient(configuration)))
    if args.once:
        rotator.reconcile()
        return 0
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    rotator.run(stop, interval=args.interval)
    return 0
