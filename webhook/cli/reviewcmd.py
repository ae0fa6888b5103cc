"""The `review` command: one object through the admission pipeline, against manifests or the live cluster.

Offline it reads `--cluster` manifests. With `--live` (or `--kubeconfig`) it reads from the API only what this one
review needs (webhook/state/ondemand.py) and, without `--policy`, the policy the server reads: the ConfigMap
`--policy-configmap` in `--namespace`, or the embedded default when there is none. That is `kubectl apply
--dry-run=server` with the reasons, and without needing the right to create the object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rules.safeload import unreadable
from webhook.cli.args import EXIT_ALLOWED, EXIT_BAD_INPUT, EXIT_DENIED, cluster_files, positive_seconds, subcommand
from webhook.files import read_text
from webhook.settings import default

#: Seconds each request of `--live` may take, from its start to its last byte.
LOOKUP_TIMEOUT = 10.0

if TYPE_CHECKING:
    from rules.cluster import ClusterView
    from rules.policy import Policy


def add_parser(sub: Any) -> None:
    rev = subcommand(
        sub,
        "review",
        "run the admission pipeline on one object: mutate, apply, validate (offline, or against the live cluster)",
        "Review one object as the API server would send it to both webhooks: mutate, apply the\n"
        "patch, validate the result; print the decision, warnings on stderr. With --live (or\n"
        "--kubeconfig) the cluster state and the policy are read from the API: only what this\n"
        "review needs, never every pod.",
        "0  allowed",
        "1  denied (the reason on stderr)",
        bad="bad input or usage, a kind review does not check, or (live) an API that fails",
    )
    rev.add_argument(
        "-f",
        "--file",
        required=True,
        metavar="FILE",
        help="AdmissionReview or bare Pod, ConfigMap or workload (Job, CronJob, Deployment...); - for stdin",
    )
    rev.add_argument(
        "--policy",
        type=Path,
        help="policy file (ConfigMap or bare document); default: embedded, or live the cluster's policy ConfigMap",
    )
    cluster_files(
        rev,
        "cluster state manifests (Pods, PVCs, PVs, StorageClasses, Nodes, ConfigMaps, VolumeSnapshots,"
        " VolumeSnapshotContents, VirtualMachines, DataVolumes)",
    )
    rev.add_argument(
        "--live",
        action="store_true",
        help="read the cluster state from the Kubernetes API ($KUBECONFIG, in-cluster service account, "
        "~/.kube/config), as the server would now",
    )
    rev.add_argument("--kubeconfig", type=Path, help="kubeconfig of the live API (implies --live)")
    rev.add_argument(
        "--lookup-timeout",
        type=positive_seconds,
        default=LOOKUP_TIMEOUT,
        metavar="SECONDS",
        help="live: seconds each API request may take, from its start to its last byte (default %(default)s)",
    )
    rev.add_argument(
        "--policy-configmap",
        default=default("policy_configmap"),
        metavar="NAME",
        help="live, without --policy: the policy ConfigMap in --namespace, as serve reads it (default %(default)s)",
    )
    rev.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE", ""),
        help="the webhook's own namespace: exempt, and live where its policy ConfigMap is (default: $POD_NAMESPACE)",
    )
    rev.add_argument(
        "-o",
        "--output",
        choices=["json", "yaml", "patch"],
        default="json",
        help="json: the whole decision; yaml: the object as admitted; patch: the JSON Patch (default %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    from rules.context import BadObject
    from rules.policy import PolicyError
    from rules.safeload import DocumentError, load_documents
    from webhook.app.codec import ReviewError
    from webhook.cli.review import as_request, review
    from webhook.policy.file import load_policy_file
    from webhook.state.static import load_static_state

    live = args.live or args.kubeconfig is not None
    if live and args.cluster:
        return _bad("--cluster reads manifests, --live and --kubeconfig the API: give one or the other")
    view: Any = None
    try:
        source = "<stdin>" if args.file == "-" else args.file
        text = sys.stdin.read() if args.file == "-" else read_text(args.file)
        documents = load_documents(text, source)
        if len(documents) != 1:
            raise DocumentError(f"{source}: expected exactly one document, found {len(documents)}")
        request = as_request(documents[0])
        if live:
            view = _live_view(args.kubeconfig, args.lookup_timeout)
            policy = load_policy_file(args.policy)[0] if args.policy else _cluster_policy(view, args)
        else:
            policy, _ = load_policy_file(args.policy)
            view = load_static_state(args.cluster)
        result = review(request, policy, view, args.namespace)
    except (OSError, UnicodeDecodeError) as exc:
        return _bad(unreadable(source, exc))
    except (DocumentError, PolicyError, _LiveError) as exc:  # these name their file or source
        return _bad(str(exc))
    except (ReviewError, BadObject) as exc:
        return _bad(f"{source}: {exc}")
    finally:
        if live and view is not None:
            view.close()
    if failures := getattr(view, "failures", None):
        return _bad(f"the Kubernetes API failed, so this is not what the server would answer: {failures[0]}")
    print(_rendered(result, args.output))
    for warning in result.warnings:
        print(f"Warning: {warning}", file=sys.stderr)
    if not result.allowed:
        print(f"Error: {result.status_message}", file=sys.stderr)
        return EXIT_DENIED
    return EXIT_ALLOWED


class _LiveError(Exception):
    """The live API cannot be used for this review; the message says why."""


def _live_view(kubeconfig: Path | None, timeout: float) -> ClusterView:
    """The on-demand view of the API (typed as the rules' view, so mypy holds it to every read they make)."""
    from webhook.state.apisource import ApiConfigError, load_configuration
    from webhook.state.ondemand import OnDemandView

    try:
        configuration, _ = load_configuration(kubeconfig)
    except ApiConfigError as exc:
        raise _LiveError(str(exc)) from None
    return OnDemandView(configuration, timeout=timeout)


def _cluster_policy(view: Any, args: argparse.Namespace) -> Policy:
    """The policy the server reads: the ConfigMap labelled as the policy, else the embedded default (the base a
    server without `--policy` falls back to). An invalid one is refused: the server keeps its last valid policy,
    which no API read shows."""
    from rules.cluster import LookupFailed
    from rules.policy import default_policy, is_policy_config_map, policy_from_config_map

    if not args.namespace:
        raise _LiveError(
            "--live needs --namespace (or $POD_NAMESPACE), where the policy ConfigMap is, or --policy FILE"
        )
    try:
        config_map: dict[str, Any] | None = view.read_config_map(args.namespace, args.policy_configmap)
    except LookupFailed as exc:
        raise _LiveError(f"cannot read the policy ConfigMap: {exc}") from None
    if config_map is None or not is_policy_config_map(config_map):
        return default_policy()
    return policy_from_config_map(config_map, f"ConfigMap {args.namespace}/{args.policy_configmap}")


def _rendered(result: Any, output: str) -> str:
    if output == "json":
        return json.dumps(result.as_json(), indent=2)
    if output == "patch":
        return json.dumps(result.patch, indent=2)
    return yaml.dump(result.object, Dumper=_PlainDumper, sort_keys=False).rstrip()


def _bad(message: str) -> int:
    print(f"storage-affinity-webhook: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


class _PlainDumper(yaml.SafeDumper):
    """Never emits anchors/aliases: a shared object in a patch must not come out as `&id001` (our loader refuses
    aliases)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
