"""The `serve` command: its options, the checks made once in the master before any worker starts, and the
Settings the server runs with."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from rules.safeload import unreadable
from webhook.cli.args import EXIT_BAD_INPUT, cluster_files, subcommand
from webhook.serving import selfcerts
from webhook.settings import LeaseTiming, default


def add_parser(sub: Any) -> None:
    serve = subcommand(
        sub,
        "serve",
        "run the HTTPS admission server (gunicorn, gevent workers)",
        "Serve /mutate and /validate over HTTPS, with cluster state from the Kubernetes API (live) or\n"
        "from --cluster manifests (static), until SIGTERM.",
        "0  stopped by SIGTERM after in-flight reviews finished",
        "1  --cert-mode self could not issue the first certificate",
    )
    serve.add_argument("--bind", default=default("bind"), help="address:port to listen on (default %(default)s)")
    serve.add_argument("--cert", required=True, type=Path, help="serving certificate (PEM)")
    serve.add_argument("--key", required=True, type=Path, help="serving key (PEM)")
    serve.add_argument(
        "--client-ca",
        type=Path,
        metavar="FILE",
        help="answer /mutate and /validate only to TLS clients presenting a certificate signed by a CA in FILE\n"
        "itself, with the clientAuth extended key usage and a --client-name (PEM; kube-apiserver's,\n"
        "docs/operations.md); /healthz, /readyz and /metrics need none. Reloaded on change",
    )
    serve.add_argument(
        "--client-name",
        action="append",
        default=[],
        metavar="NAME",
        help="with --client-ca: the identity kube-apiserver's client certificate presents, its common name or a\n"
        "DNS subject alternative name, matched exactly (repeatable; at least one is required)",
    )
    serve.add_argument("--policy", type=Path, help="policy file: a bare policy document or a ConfigMap")
    cluster_files(serve, "static cluster state manifests (default: live state from the Kubernetes API)")
    serve.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig for live state (default: $KUBECONFIG, in-cluster service account, ~/.kube/config)",
    )
    serve.add_argument(
        "--policy-configmap",
        default=default("policy_configmap"),
        metavar="NAME",
        help="policy ConfigMap in --namespace, labelled storage-affinity.io/policy=true, reloaded on change "
        "(live state only; default %(default)s)",
    )
    serve.add_argument(
        "--lookup-timeout",
        type=float,
        default=default("lookup_timeout"),
        metavar="SECONDS",
        help="budget of the one API GET made on a cache miss (default %(default)s; keep it well under timeoutSeconds)",
    )
    serve.add_argument(
        "--start-timeout",
        type=float,
        default=default("start_timeout"),
        metavar="SECONDS",
        help="live state: a worker accepts connections once its first lists and the policy are loaded, or after "
        "this long with /readyz saying what is missing (default %(default)s; keep it under the liveness window)",
    )
    serve.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE", ""),
        help="the webhook's own namespace, always exempt (default: $POD_NAMESPACE)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=default("workers"),
        help="gunicorn worker processes (default %(default)s: each lists and watches the whole cluster; scale with "
        "replicas)",
    )
    serve.add_argument(
        "--max-body-bytes", type=int, default=default("max_body"), help="largest accepted body (default %(default)s)"
    )
    serve.add_argument(
        "--graceful-timeout",
        type=int,
        default=default("graceful_timeout"),
        help="seconds in-flight reviews get to finish on SIGTERM (default %(default)s)",
    )
    serve.add_argument(
        "--read-timeout",
        type=float,
        default=default("read_timeout"),
        metavar="SECONDS",
        help="a new connection's TLS handshake and first request headers, and a request's body, must arrive "
        "within this long, or the connection is closed (the body gets 408) (default %(default)s)",
    )
    serve.add_argument(
        "--trivial-endpoint",
        action="store_true",
        help="also serve POST /allow, which parses a review and allows it (benchmark floor)",
    )
    serve.add_argument(
        "--metrics-namespaces",
        action="store_true",
        help="label the audit's findings on /metrics by namespace too (default: by family only: /metrics needs\n"
        "no certificate, and would name every namespace with findings)",
    )
    serve.add_argument(
        "--audit-interval",
        type=float,
        default=default("audit_interval"),
        metavar="SECONDS",
        help="audit the objects in the state the server holds this often, into the audit metrics (default "
        "%(default)s; 0 turns it off)",
    )
    serve.add_argument(
        "--log-level",
        default=default("log_level"),
        choices=["debug", "info", "warning", "error"],
        help="least severe log record written (default %(default)s)",
    )
    serve.add_argument(
        "--log-reviews",
        action="store_true",
        help="log one info line per review answered: kind, namespace/name, operation, allowed or denied, patch "
        "operations, warnings, duration (make run sets it; off by default)",
    )
    serve.add_argument(
        "--reports",
        choices=["auto", "openreports", "wgpolicyk8s", "off"],
        default=default("reports"),
        help="live state: write the audit's results as policy reports, OpenReports or wgpolicyk8s.io PolicyReports "
        "(default %(default)s: whichever the cluster serves)",
    )
    serve.add_argument(
        "--events",
        choices=["on", "off"],
        default=default("events"),
        help="live state: record a Warning Event on each stuck storage pod and on its owner (ReplicationSource or "
        "ReplicationDestination, DataUpload or DataDownload, DataVolume), from the replica holding the lease "
        "(default %(default)s)",
    )
    serve.add_argument(
        "--lease-name",
        default=default("lease_name"),
        help="the Lease in --namespace that picks the one replica writing reports and Events",
    )
    for name, what in (
        ("lease_duration", "how long a holder's lease lasts"),
        ("lease_renew_deadline", "how long the holder writes after its last renewal"),
        ("lease_retry_period", "how often each replica tries to take or renew the lease"),
    ):
        serve.add_argument(
            f"--{name.replace('_', '-')}",
            type=float,
            default=default(name),
            metavar="SECONDS",
            help=f"{what} (default %(default)s)",
        )

    serve.add_argument(
        "--cert-mode",
        choices=["files", "self"],
        default="files",
        help="files: serve --cert/--key as given; self: issue and rotate them (Secret + caBundle)",
    )
    serve.add_argument("--cert-dir", type=Path, help="self mode: where the certificate files are written")
    serve.add_argument("--cert-secret", help="self mode: the Secret holding the CA and serving certificate")
    serve.add_argument("--service", help="self mode: the webhook Service name (certificate SANs)")
    serve.add_argument("--mutating-webhook", help="self mode: MutatingWebhookConfiguration to keep the caBundle of")
    serve.add_argument("--validating-webhook", help="self mode: ValidatingWebhookConfiguration to keep the caBundle of")


def run(args: argparse.Namespace) -> int:
    rotator = None
    if args.cert_mode == "self":
        if problem := _self_mode_problem(args):
            print(f"storage-affinity-webhook: {problem}", file=sys.stderr)
            return EXIT_BAD_INPUT
        try:
            rotator = selfcerts.start_rotator(args)  # the files exist before the path checks below
        except subprocess.CalledProcessError:
            print("storage-affinity-webhook: no certificate: the first rotation failed (see above)", file=sys.stderr)
            return 1
    try:
        return _serve_files(args)
    finally:
        if rotator is not None:
            rotator.terminate()
            rotator.wait(timeout=10)


def _serve_files(args: argparse.Namespace) -> int:
    from webhook.serving.server import run
    from webhook.settings import Settings

    optional = [path for path in (args.policy, args.client_ca) if path]
    for path in (args.cert, args.key, *(args.cluster or ()), *optional):
        try:
            path.open("rb").close()
        except OSError as exc:
            print(f"storage-affinity-webhook: {unreadable(str(path), exc)}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if args.client_ca and (problem := _client_ca_problem(args.client_ca)):
        print(f"storage-affinity-webhook: --client-ca {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if problem := _client_names_problem(args.client_ca, args.client_name):
        print(f"storage-affinity-webhook: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.audit_interval < 0:
        print(f"storage-affinity-webhook: --audit-interval {args.audit_interval:g}: 0 (off) or more", file=sys.stderr)
        return EXIT_BAD_INPUT
    live = not args.cluster
    if live and (problem := _live_problem(args)):
        print(f"storage-affinity-webhook: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    run(
        Settings(
            cert=args.cert,
            key=args.key,
            client_ca=args.client_ca,
            client_names=tuple(args.client_name),
            bind=args.bind,
            workers=args.workers,
            policy_file=args.policy,
            cluster_files=tuple(args.cluster),
            namespace=args.namespace,
            max_body=args.max_body_bytes,
            graceful_timeout=args.graceful_timeout,
            read_timeout=args.read_timeout,
            trivial_endpoint=args.trivial_endpoint,
            log_level=args.log_level,
            log_reviews=args.log_reviews,
            live=live,
            kubeconfig=args.kubeconfig,
            policy_configmap=args.policy_configmap,
            lookup_timeout=args.lookup_timeout,
            start_timeout=args.start_timeout,
            audit_interval=args.audit_interval,
            metrics_namespaces=args.metrics_namespaces,
            reports=args.reports,
            events=args.events,
            lease_name=args.lease_name,
            lease_duration=args.lease_duration,
            lease_renew_deadline=args.lease_renew_deadline,
            lease_retry_period=args.lease_retry_period,
        )
    )
    return 0


def _client_ca_problem(path: Path) -> str | None:
    """Why the client CA file cannot verify anyone (no certificate in it), or None."""
    from certs.issue import load_certs_pem

    try:
        load_certs_pem(path.read_bytes())
    except ValueError:
        return f"{path}: no PEM certificate could be read from it (a CA bundle: -----BEGIN CERTIFICATE----- blocks)"
    return None


def _client_names_problem(client_ca: Path | None, names: list[str]) -> str | None:
    """Why the client identities cannot be used, or None: a CA alone would let every certificate it signs ask (a
    shared CA signs for tenants too), and a name without a CA checks nothing."""
    if client_ca is None:
        return "--client-name needs --client-ca" if names else None
    if not names:
        return (
            "--client-ca needs at least one --client-name: the CN or DNS SAN of kube-apiserver's client certificate "
            "(docs/operations.md#only-the-api-server-asks)"
        )
    for name in names:
        if not 0 < len(name) <= 253 or not name.isprintable() or name != name.strip():
            return f"--client-name {name!r}: 1 to 253 printable characters, no leading or trailing space"
    return None


def _self_mode_problem(args: argparse.Namespace) -> str | None:
    missing = [f"--{n.replace('_', '-')}" for n in ("cert_dir", "cert_secret", "service") if not getattr(args, n)]
    if missing:
        return f"--cert-mode self needs {', '.join(missing)}"
    if not args.namespace:
        return "--cert-mode self needs --namespace (or $POD_NAMESPACE)"
    return None


def _live_problem(args: argparse.Namespace) -> str | None:
    """Why live state cannot start (checked once, before the workers each connect); fills in the namespace."""
    from webhook.state.apisource import ApiConfigError, api_source

    if not 0 < args.lookup_timeout < 5:
        return f"--lookup-timeout {args.lookup_timeout:g}: must be more than 0 and less than 5 seconds"
    if not args.start_timeout > 0:
        return f"--start-timeout {args.start_timeout:g}: must be more than 0 seconds"
    if problem := LeaseTiming(args.lease_duration, args.lease_renew_deadline, args.lease_retry_period).problem():
        return problem
    if not args.namespace:
        service_account = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        args.namespace = service_account.read_text().strip() if service_account.is_file() else ""
    if not args.namespace:
        return "live state needs --namespace (or $POD_NAMESPACE) to find the policy ConfigMap"
    try:
        api_source(args.kubeconfig)  # the workers load it: the master must not import the client (gevent)
    except ApiConfigError as exc:
        return str(exc)
    return None
