"""The workloads the audit checks (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs), listed from
the API page by page: once per kind per run, never kept in the server's state, since no admission rule reads one.
The `audit` command and the in-server audit list them the same way."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from rules.model import Json

#: The page size and each page's timeout (seconds) of every list the audit makes.
PAGE_SIZE = 500
PAGE_TIMEOUT = 60
#: The kinds, in the order they are listed.
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob")


def namespaced(api: Any, what: str, namespace: str | None) -> tuple[Callable[..., Any], tuple[str, ...]]:
    """The client's list call of a namespaced resource (`what`, as the client spells it): across all namespaces,
    or in one."""
    if namespace is None:
        return getattr(api, f"list_{what}_for_all_namespaces"), ()
    return getattr(api, f"list_namespaced_{what}"), (namespace,)


def workload_lists(api: Any, namespace: str | None) -> dict[str, tuple[Callable[..., Any], tuple[str, ...]]]:
    """kind → its list call, on the ApiClient `api`."""
    from kubernetes import client

    apps, batch = client.AppsV1Api(api), client.BatchV1Api(api)
    return {
        "Deployment": namespaced(apps, "deployment", namespace),
        "StatefulSet": namespaced(apps, "stateful_set", namespace),
        "DaemonSet": namespaced(apps, "daemon_set", namespace),
        "ReplicaSet": namespaced(apps, "replica_set", namespace),
        "Job": namespaced(batch, "job", namespace),
        "CronJob": namespaced(batch, "cron_job", namespace),
    }


def list_workloads(api: Any) -> Iterator[Json]:
    """Every workload of every namespace, kind by kind, page by page; raises what the client raises."""
    from webhook.state.watch import list_pages

    for kind, (call, args) in workload_lists(api, None).items():
        for obj in list_pages(call, *args, page_size=PAGE_SIZE, timeout=PAGE_TIMEOUT):
            obj["kind"] = kind
            yield obj
