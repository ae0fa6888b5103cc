"""The workloads the audit checks (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs), listed from
the API page by page: once per kind per run, never kept in the server's state, since no admission rule reads one.
The `audit` command and the in-server audit list them the same way: in small pages (a workload may be 1.5 MiB, and
a page is decoded whole), each object trimmed as it comes to what the template rules read, as the index trims pods
(webhook/state/index.py `trim`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from rules.kube.workloads import TEMPLATE_PATHS, template_of
from rules.model import Json
from webhook.settings import AUDIT_PAGE_TIMEOUT
from webhook.state.index import trim
from webhook.state.owners import controller_reference

if TYPE_CHECKING:
    from webhook.state.watch import PageSizes

#: Each page of a workload list: at most PAGE_SIZE objects, and after the first (of FIRST_PAGE) as many as fit
#: PAGE_BYTES at the last page's average size (webhook/state/watch.py `PageSizes`). A page is decoded at once,
#: without yielding: fifty workloads of 1.25 MiB took about 450 ms and 250 MB, ten 80 ms (`python -m bench.deadline`),
#: while pages of ten objects of 2 KB made listing 5,000 Deployments take 24 s instead of 2.7 s.
PAGE_SIZE = 50
FIRST_PAGE = 10
PAGE_BYTES = 8 * 1024 * 1024
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
        for obj in list_pages(call, *args, page_size=page_sizes(), timeout=AUDIT_PAGE_TIMEOUT):
            yield trim_workload(obj, kind)


def page_sizes() -> PageSizes:
    """The page sizes of one workload list."""
    from webhook.state.watch import PageSizes  # the client only where the API is used, as `list_workloads`

    return PageSizes(PAGE_BYTES, FIRST_PAGE, PAGE_SIZE)


#: What of a workload's own metadata the audit reads: who it is (reports name it by uid) and its version (one the
#: deadline refused is not audited again until it changes).
_METADATA = ("name", "namespace", "uid", "resourceVersion")


def trim_workload(obj: Json, kind: str) -> Json:
    """The workload as the audit reads it: its identity, its pod template trimmed as the index trims a pod, and a
    StatefulSet's claim template names (the volumes its pods mount: rules/kube/workloads.py `template_spec`)."""
    meta = obj.get("metadata") or {}
    out: Json = {"kind": kind, "metadata": {k: meta[k] for k in _METADATA if meta.get(k) is not None}}
    if kind == "Job" and (owner := controller_reference(meta)) is not None:
        out["metadata"]["ownerReferences"] = [owner]  # a VolSync mover's owner (rules/auditevents.py)
    path = TEMPLATE_PATHS[kind]
    template = template_of(obj, path)
    pod = trim({"kind": "Pod", "metadata": template.get("metadata") or {}, "spec": template.get("spec") or {}})
    at = out
    for part in path[:-1]:
        at = at.setdefault(part, {})
    at[path[-1]] = {"metadata": pod["metadata"], "spec": pod["spec"]}
    if kind == "StatefulSet":
        claims = (obj.get("spec") or {}).get("volumeClaimTemplates") or ()
        names = [name for claim in claims if (name := (claim.get("metadata") or {}).get("name"))]
        if names:
            out["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": name}} for name in names]
    return out
