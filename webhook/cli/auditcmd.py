"""The `audit` command: every validating rule, what the mutating rules would change now, and why each stuck
storage pod is stuck, over the live API or manifests."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from webhook.cli.args import EXIT_BAD_INPUT, cluster_files, positive_seconds, subcommand
from webhook.settings import AUDIT_PAGE_TIMEOUT, default


def add_parser(sub: Any) -> None:
    aud = subcommand(
        sub,
        "audit",
        "review existing objects: every validating rule, what the mutating rules would change now, and why "
        "each stuck storage pod is stuck",
        "Audit the objects of the live API, or of --cluster manifests: every file after --cluster,\n"
        "up to the next option, is one set, both the objects audited and the cluster they are\n"
        "judged against (repeat --cluster to add more).",
        "0  no findings",
        "1  findings",
        bad="bad input or usage, or the API cannot be reached or refuses to list",
    )
    cluster_files(
        aud, "audit the objects of these manifest files (the formats of review --cluster) instead of the live API"
    )
    aud.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig for the live API (default: $KUBECONFIG, in-cluster service account, ~/.kube/config)",
    )
    aud.add_argument(
        "--lookup-timeout",
        type=positive_seconds,
        default=AUDIT_PAGE_TIMEOUT,
        metavar="SECONDS",
        help="live: seconds each page of a list may take, from its start to its last byte (default %(default)s)",
    )
    scope = aud.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", help="audit this namespace only")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="audit every namespace (the default)")
    aud.add_argument(
        "--policy",
        type=Path,
        help="policy file (ConfigMap or bare document); default: live, the cluster's policy ConfigMap (as serve "
        "reads it); with --cluster, the embedded one",
    )
    aud.add_argument(
        "--policy-namespace",
        default=os.environ.get("POD_NAMESPACE", ""),
        metavar="NS",
        help="live, without --policy: the webhook's namespace, where its policy ConfigMap is (default: "
        "$POD_NAMESPACE, set in the webhook's own pod)",
    )
    aud.add_argument(
        "--policy-configmap",
        default=default("policy_configmap"),
        metavar="NAME",
        help="live, without --policy: the policy ConfigMap in --policy-namespace (default %(default)s)",
    )
    aud.add_argument(
        "-o",
        "--output",
        choices=["table", "wide", "json", "yaml"],
        help="table: one row a finding, messages wrapped to the terminal; wide: also PHASE and REMEDY, one line "
        "a finding, never wrapped (default: table on a terminal, json otherwise)",
    )


def run(args: argparse.Namespace) -> int:
    from rules.datasource.exposer import data_mover_namespace
    from rules.policy import PolicyError
    from rules.safeload import DocumentError
    from webhook.audit import command as audit
    from webhook.audit import output
    from webhook.policy.cluster import ClusterPolicyUnreadable
    from webhook.policy.file import load_policy_file

    try:
        from_cluster = not args.policy and not args.cluster
        if from_cluster and not args.policy_namespace:
            raise audit.AuditSourceError(
                "the live audit judges by the server's policy: give --policy-namespace (the webhook's namespace, "
                "where its policy ConfigMap is; $POD_NAMESPACE in its pod) or --policy FILE"
            )
        # the API's settings are loaded once: an exec credential plugin runs once for the policy read and the lists
        configuration = audit.api_configuration(args.kubeconfig) if from_cluster else None
        # the policy first: it names Velero's namespace, where the live audit lists DataUploads
        if from_cluster:
            policy, source = audit.policy_from_api(
                configuration, args.policy_namespace, args.policy_configmap, timeout=args.lookup_timeout
            )
        else:
            policy, source = load_policy_file(args.policy)
        if args.cluster:
            objects, view = audit.objects_from_files(args.cluster)
        else:
            progress = audit.progress_to(sys.stderr)
            objects, view = audit.objects_from_api(
                configuration or audit.api_configuration(args.kubeconfig),
                args.namespace,
                progress,
                timeout=args.lookup_timeout,
                velero_namespace=data_mover_namespace(policy),
            )
    except (DocumentError, PolicyError, audit.AuditSourceError, ClusterPolicyUnreadable) as exc:
        print(f"storage-affinity-webhook: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    run = audit.run_audit(objects, view, policy, args.namespace, policy_source=source)
    print(output.render(run, args.output or output.default_output(sys.stdout), output.table_width(sys.stdout)))
    return audit.exit_code(run)
