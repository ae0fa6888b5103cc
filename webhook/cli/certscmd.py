"""The certificate commands: `rotate-certs` (certificate mode self's rotator) and `certs` (a development CA and
serving certificate)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from webhook.cli.args import EXIT_BAD_INPUT, subcommand
from webhook.serving import selfcerts


def add_rotate_parser(sub: Any) -> None:
    rot = subcommand(
        sub,
        "rotate-certs",
        "certificate mode self: issue and rotate the webhook's certificates",
        "Keep the CA and serving certificate in --cert-secret current, write them to --cert-dir and\n"
        "the CA into the webhook configurations' caBundle (what `serve --cert-mode self` runs).",
        "0  reconciled (--once), or stopped by SIGTERM",
        "1  a rotation failed (the message says why)",
    )
    rot.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", ""), help="the Secret's namespace")
    rot.add_argument("--kubeconfig", type=Path, help="kubeconfig (default: $KUBECONFIG or in-cluster)")
    rot.add_argument("--once", action="store_true", help="reconcile once and exit")
    rot.add_argument("--interval", type=float, default=600.0, help="seconds between reconciles (default 600)")
    selfcerts.add_arguments(rot)


def add_certs_parser(sub: Any) -> None:
    certs = subcommand(
        sub,
        "certs",
        "issue a development CA and serving certificate",
        "Write a fresh development CA (ca.crt) and a serving certificate for the Service's DNS\n"
        "names (tls.crt, tls.key) into --out; the CA key is not kept.",
        "0  written",
    )
    certs.add_argument("--service", required=True, help="the webhook Service name")
    certs.add_argument("--namespace", required=True, help="the Service's namespace")
    certs.add_argument("--out", required=True, type=Path, help="directory for ca.crt, tls.crt, tls.key")
    certs.add_argument(
        "--client-cert",
        metavar="NAME",
        help="also issue a client certificate NAME from the same CA (client.crt, client.key), for\n"
        "kube-apiserver to present to a server run with --client-ca ca.crt",
    )


def rotate(args: argparse.Namespace) -> int:
    from webhook.logs import configure_logging
    from webhook.state.apisource import ApiConfigError

    configure_logging("info")
    try:
        return selfcerts.rotate(args)
    except ApiConfigError as exc:  # bad input, like every command's: no API settings to use
        print(f"storage-affinity-webhook: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # the message matters more than the trace to an operator reading pod logs
        print(f"storage-affinity-webhook: certificate rotation failed: {exc}", file=sys.stderr)
        return 1


def issue(args: argparse.Namespace) -> int:
    from certs.cli import issue_to_dir

    try:
        issue_to_dir(args.service, args.namespace, args.out, client=args.client_cert)
    except ValueError as exc:  # a service or namespace that is no DNS label (certs/issue.py names which)
        print(f"storage-affinity-webhook: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"storage-affinity-webhook: {exc.filename or args.out}: cannot write: {exc.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0
