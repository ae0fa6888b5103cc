"""The `review` command: one object through the admission pipeline, against manifests or the live cluster.

Offline it reads `--cluster` manifests. With `--live` (or `--kubeconfig`) it reads from the API only what this one
review needs (webhook/state/ondemand.py) and, without `--policy`, the policy the server reads: the ConfigMap
`--policy-configmap` in `--namespace`, or the embedded default when there is none. That is `kubectl apply
--dry-run=server` with the reasons, and without needing the right to create the object.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rules.safeload import unreadable
from webhook.cli.args import EXIT_ALLOWED, EXIT_BAD_INPUT, EXIT_DENIED, cluster_files, positive_seconds, subcommand
from webhook.files import read_text
from webhook.settings import CLI_REQUEST_TIMEOUT, default

if TYPE_CHECKING:
    from rules.cluster import ClusterView
    from rules.policy import Policy
    from webhook.cli.reviewout import Reviewed


def add_parser(sub: Any) -> None:
    rev = subcommand(
        sub,
        "review",
        "run the admission pipeline on one object: mutate, apply, validate (offline, or against the live cluster)",
        "Review each object as the API server would send it to both webhooks: mutate, apply the\n"
        "patch, validate the result; print the decision, warnings on stderr. -f may repeat, and a\n"
        "file may hold several documents (or a List): each object is reviewed, one result each.\n"
        "With --live (or --kubeconfig) the cluster state and the policy are read from the API:\n"
        "only what these reviews need, never every pod.",
        "0  every object allowed",
        "1  an object denied (the reason on stderr)",
        bad="bad input or usage, a kind review does not check, or (live) an API that fails",
    )
    rev.add_argument(
        "-f",
        "--file",
        required=True,
        action="append",
        metavar="FILE",
        help="AdmissionReviews or bare Pods, ConfigMaps or workloads (Job, CronJob, Deployment...), one or more "
        "documents or a List; - for stdin; may repeat",
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
        default=CLI_REQUEST_TIMEOUT,
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
        choices=["summary", "json", "yaml", "patch"],
        help="summary: what a person reads (decisions, warnings, violations, the patch as a diff); json: the whole "
        "decision; yaml: the object as admitted; patch: the JSON Patch (default: summary on a terminal, json "
        "otherwise); several objects: a list, each with its source (yaml: a document each)",
    )


def run(args: argparse.Namespace) -> int:
    from rules.context import BadObject
    from rules.policy import PolicyError
    from rules.safeload import DocumentError, load_documents
    from webhook.app.codec import ReviewError
    from webhook.cli.review import as_request, review
    from webhook.cli.reviewout import Reviewed, default_output, rendered
    from webhook.policy.file import load_policy_file
    from webhook.state.static import load_static_state

    live = args.live or args.kubeconfig is not None
    if live and args.cluster:
        return _bad("--cluster reads manifests, --live and --kubeconfig the API: give one or the other")
    if args.file.count("-") > 1:
        return _bad("-f -: standard input can be read once")
    view: Any = None
    reviewed: list[Reviewed] = []
    bad: list[str] = []
    source = ""
    try:
        documents: list[tuple[str, Any]] = []
        for source in args.file:
            text = _stdin() if source == "-" else read_text(source)
            shown = "<stdin>" if source == "-" else source
            documents += _objects(shown, load_documents(text, shown))
        if not documents:
            raise DocumentError(f"{', '.join(args.file)}: no object to review")
        if live:
            view = _live_view(args.kubeconfig, args.lookup_timeout)
            policy, policy_source = load_policy_file(args.policy) if args.policy else _cluster_policy(view, args)
        else:
            policy, policy_source = load_policy_file(args.policy)
            view = load_static_state(args.cluster)
        for named, document in documents:
            try:
                result = review(as_request(document), policy, view, args.namespace)
            except (ReviewError, BadObject) as exc:
                bad.append(f"{named}: {exc}")
                continue
            result.decisions.insert(0, f"policy: {policy_source}")
            reviewed.append(Reviewed(named, result))
    except (OSError, UnicodeDecodeError) as exc:
        return _bad(unreadable("<stdin>" if source == "-" else source, exc))
    except (DocumentError, PolicyError, _LiveError) as exc:  # these name their file or source
        return _bad(str(exc))
    finally:
        if live and view is not None:
            view.close()
    if failures := getattr(view, "failures", None):
        return _bad(f"the Kubernetes API failed, so this is not what the server would answer: {failures[0]}")
    output = args.output or default_output(sys.stdout)
    several = len(reviewed) + len(bad) > 1
    if reviewed:
        print(rendered(reviewed, output, several=several))
    for item in reviewed:
        named = f"{item.source}: " if several else ""
        for warning in item.result.warnings if output != "summary" else ():  # the summary has them
            print(f"Warning: {named}{warning}", file=sys.stderr)
        if not item.result.allowed:
            print(f"Error: {named}{item.result.status_message}", file=sys.stderr)
    for message in bad:
        _bad(message)
    if bad:
        return EXIT_BAD_INPUT
    return EXIT_DENIED if any(not item.result.allowed for item in reviewed) else EXIT_ALLOWED


def _objects(source: str, documents: list[Any]) -> list[tuple[str, Any]]:
    """Each object of a file's documents (a `kind: List` gives its items), named `FILE`, or `FILE#N` (from 1)
    when the file holds several."""
    found: list[Any] = []
    for document in documents:
        if isinstance(document, dict) and document.get("kind") == "List" and isinstance(document.get("items"), list):
            found += document["items"]
        else:
            found.append(document)
    if len(found) == 1:
        return [(source, found[0])]
    return [(f"{source}#{index}", document) for index, document in enumerate(found, 1)]


def _stdin() -> str:
    """Standard input, bounded as every file the command line reads is (webhook/files.py)."""
    from webhook.files import MAX_FILE_BYTES, refused

    text = sys.stdin.read(MAX_FILE_BYTES + 1)
    if len(text) > MAX_FILE_BYTES:
        raise refused("-", f"larger than {MAX_FILE_BYTES >> 20} MiB")
    return text


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


def _cluster_policy(view: Any, args: argparse.Namespace) -> tuple[Policy, str]:
    """The policy the server in --namespace reads (webhook/policy/cluster.py)."""
    from webhook.policy.cluster import ClusterPolicyUnreadable, cluster_policy

    if not args.namespace:
        raise _LiveError(
            "--live needs --namespace (or $POD_NAMESPACE), where the policy ConfigMap is, or --policy FILE"
        )
    try:
        return cluster_policy(view, args.namespace, args.policy_configmap)
    except ClusterPolicyUnreadable as exc:
        raise _LiveError(str(exc)) from None


def _bad(message: str) -> int:
    print(f"storage-affinity-webhook: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
