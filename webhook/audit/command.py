"""`storage-affinity-webhook audit`: the audit of existing objects, from manifest files or the Kubernetes API.

The rules are `rules.audit`; this module reads the objects, filters them by namespace and prints the reports as a
sorted table for people or as JSON/YAML for tools. Exit codes: 0 clean, 1 findings, 2 bad input or no API.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from rules.audit import AUDITED_KINDS, ObjectAudit, audit_objects
from rules.causes import CODES, ENDED_CODES
from rules.messages import counted, plural
from rules.model import Json
from rules.policy import Policy
from webhook.audit.workloads import WORKLOAD_KINDS, namespaced, page_sizes, trim_workload, workload_lists
from webhook.settings import AUDIT_PAGE_TIMEOUT
from webhook.state.index import ClusterIndex, bulk_ingest, identity
from webhook.state.kinds import BY_KIND, STATE_KINDS
from webhook.state.static import read_manifests, state_of

EXIT_CLEAN, EXIT_FINDINGS = 0, 1
#: What the live audit lists, in this order: the cluster state the rules read through the typed clients
#: (webhook/state/kinds.py; the CRD kinds come after, by `_optional_objects`), cluster-scoped first, pods last, then
#: the workloads whose templates make pods, checked as `/validate` checks them (webhook/audit/workloads.py).
STATE_KINDS_LISTED = tuple(
    entry.kind
    for entry in sorted(
        (entry for entry in STATE_KINDS if entry.lister is not None), key=lambda e: (e.namespaced, e.kind == "Pod")
    )
)
LIVE_KINDS = (*STATE_KINDS_LISTED, *WORKLOAD_KINDS)
#: The page size of the state's lists (a workload list's is webhook/audit/workloads.py's).
STATE_PAGE_SIZE = 500
#: Pages of one list: a million objects in the state's pages, 200,000 workloads in the smallest pages of theirs.
MAX_PAGES = 2000


class AuditSourceError(Exception):
    """The API cannot be reached, or refuses to list (a bad file is a DocumentError, as everywhere)."""


@dataclass
class AuditRun:
    reports: list[ObjectAudit]
    policy: str = ""  # where the policy judged by came from (a file, a ConfigMap, the embedded default)

    @property
    def audited(self) -> int:
        return len(self.reports)

    @property
    def findings(self) -> int:
        return sum(len(r.findings) for r in self.reports)

    def summary(self) -> Json:
        with_findings = [r for r in self.reports if r.findings]
        return {
            "audited": self.audited,
            "findings": self.findings,
            "objectsWithFindings": len(with_findings),
            "multiAttach": sum(r.multi_attach for r in self.reports),
            "stuck": sum(r.cause is not None and r.cause.code in CODES for r in self.reports),
            "failed": sum(r.cause is not None and r.cause.code in ENDED_CODES for r in self.reports),
            **({"policy": self.policy} if self.policy else {}),
        }

    def as_json(self) -> Json:
        return {"summary": self.summary(), "objects": [r.as_json() for r in self.reports if r.findings]}


def run_audit(
    objects: Iterable[Json],
    view: Any,
    policy: Policy,
    namespace: str | None,
    now: datetime | None = None,
    *,
    policy_source: str = "",
) -> AuditRun:
    """Audit the objects of `namespace` (None: every namespace; cluster-scoped objects are never audited), as of
    `now` (default: the current time), which tells how long a pod has been stuck."""
    chosen = [o for o in objects if namespace is None or (o.get("metadata") or {}).get("namespace") == namespace]
    # its reader is the operator, who reads the Nodes: the pods' constraints are judged on every label
    reader = dataclasses.replace(policy, nodes_readable=True)
    reports = audit_objects(chosen, view, reader, now=now or datetime.now(UTC))
    return AuditRun(reports, policy_source)


def objects_from_files(paths: Iterable[Path]) -> tuple[list[Json], ClusterIndex]:
    """The objects of the manifests (the same formats as `review --cluster`) and the state they make; an object
    given twice (the same kind, namespace and name, in one file or two) is audited once, as the last one given, the
    one the index keeps. An unnamed one (a Job with only `generateName`) is each its own object."""
    manifests = read_manifests(paths)
    state = state_of(manifests)
    latest: dict[object, Json] = {}
    for _, obj in manifests:
        meta = obj.get("metadata")
        named = isinstance(meta, dict) and isinstance(meta.get("name"), str) and meta["name"]
        latest[identity(obj) if named else id(obj)] = obj
    return list(latest.values()), state


def api_configuration(kubeconfig: Path | None) -> Any:
    """The API's settings (a `kubernetes.client.Configuration`), loaded once for the live audit: its policy read and
    its lists share them, so an exec credential plugin (a cloud's `get-token`) runs once, not once per step."""
    from webhook.state.apisource import ApiConfigError, load_configuration

    try:
        configuration, _ = load_configuration(kubeconfig)
    except ApiConfigError as exc:
        raise AuditSourceError(str(exc)) from None
    return configuration


def policy_from_api(
    configuration: Any, namespace: str, name: str, *, timeout: float = AUDIT_PAGE_TIMEOUT
) -> tuple[Policy, str]:
    """The policy the server in `namespace` uses (webhook/policy/cluster.py), so that the live audit judges as
    the server does: a cluster's `trust.namespaces` or load affinity read from the embedded default instead would
    give false findings. `configuration`: `api_configuration`'s."""
    from webhook.policy.cluster import ClusterPolicyUnreadable, cluster_policy
    from webhook.state.ondemand import OnDemandView

    view = OnDemandView(configuration, timeout=timeout)
    try:
        return cluster_policy(view, namespace, name)
    except ClusterPolicyUnreadable as exc:
        raise AuditSourceError(f"{exc} (the Kubernetes API at {configuration.host})") from None
    finally:
        view.close()


def objects_from_api(
    configuration: Any,
    namespace: str | None,
    progress: Callable[[str], None],
    *,
    timeout: float = AUDIT_PAGE_TIMEOUT,
    velero_namespace: str = "",
) -> tuple[list[Json], ClusterIndex]:
    """Every object the rules read, listed page by page from the API; the audited pods and ConfigMaps are kept
    whole, the workloads trimmed to what their audit reads; the kinds read in Velero's namespace alone, there
    (`velero_namespace`, as the policy names it; "": not listed). Each page must come whole within `timeout`
    seconds and the bytes and pages of webhook/state/bounded.py, or the audit ends naming the list.
    `configuration`: `api_configuration`'s (its retries are set for the lists)."""
    from kubernetes import client  # the client only where the API is used: `audit --cluster` works without it

    from webhook.state.bounded import RequestLimits, RequestRefused
    from webhook.state.watch import list_pages

    configuration.retries = 2
    api = client.ApiClient(configuration)
    calls: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
        **{
            kind: _list_call(getattr(client, BY_KIND[kind].client)(api), kind, namespace) for kind in STATE_KINDS_LISTED
        },
        **workload_lists(api, namespace),
    }
    index = ClusterIndex()
    audited: list[Json] = []
    started = time.monotonic()
    limits = RequestLimits(timeout, max_pages=MAX_PAGES)
    what = "list"
    try:
        with bulk_ingest():
            for kind in LIVE_KINDS:
                call, args = calls[kind]
                count = 0
                workload = kind in WORKLOAD_KINDS
                size = page_sizes() if workload else STATE_PAGE_SIZE
                what = f"list {plural(kind)}"
                for obj in list_pages(call, *args, page_size=size, timeout=timeout, limits=limits):
                    if workload:
                        audited.append(trim_workload(obj, kind))
                    else:
                        obj["kind"] = kind
                        index.apply(obj)
                        if kind in AUDITED_KINDS:
                            audited.append(obj)
                    count += 1
                    if count % 500 == 0 and time.monotonic() - started > 1.0:
                        progress(f"listing {plural(kind)}: {count}…")
                if time.monotonic() - started > 1.0:
                    progress(f"listed {counted(count, kind)}")
            audited.extend(_optional_objects(api, namespace, index, limits, velero_namespace))
    except RequestRefused as exc:
        raise AuditSourceError(f"{what}: {exc} (the Kubernetes API at {configuration.host})") from None
    except AuditSourceError:
        raise
    except client.ApiException as exc:
        raise AuditSourceError(f"the Kubernetes API refused a list: {exc.status} {exc.reason}") from None
    except Exception as exc:  # urllib3's connection errors have no common base worth importing here
        raise AuditSourceError(f"the Kubernetes API cannot be reached at {configuration.host}: {exc}") from None
    finally:
        api.close()  # type: ignore[no-untyped-call]
    return audited, index


def _optional_objects(
    api: Any, namespace: str | None, index: ClusterIndex, limits: Any, velero_namespace: str
) -> list[Json]:
    """The objects of every optional group the server follows (webhook/state/optional.py: VolumeSnapshots and
    their contents, KubeVirt VirtualMachines, CDI DataVolumes, Velero's DataUploads), put into the index; none of
    a group the cluster does not serve (not an error). The VMs among them are audited against the nodes their
    disks are bound on."""
    from webhook.state.optional import OPTIONAL_GROUPS

    found: list[Json] = []
    for group in OPTIONAL_GROUPS:
        for resources, kind in group.resources:
            scope = None if kind in group.cluster_scoped else namespace  # listed everywhere: kinds.py says why
            if kind in group.in_velero_namespace:  # where the server reads them, whatever namespace is audited
                if not velero_namespace:
                    continue
                scope = velero_namespace
            found.extend(
                _custom_objects(api, scope, index, (group.group, group.version, resources), kind, limits=limits)
            )
    return found


def _custom_objects(
    api: Any, namespace: str | None, index: ClusterIndex, resource: tuple[str, str, str], kind: str, *, limits: Any
) -> list[Json]:
    """Every object of a CRD's resource, put into the index; none when its group is not served."""
    from kubernetes import client

    from webhook.state.bounded import RequestRefused
    from webhook.state.watch import list_pages

    custom = client.CustomObjectsApi(api)
    group, version, plural = resource
    call, args = (
        (custom.list_cluster_custom_object, (group, version, plural))
        if namespace is None
        else (custom.list_namespaced_custom_object, (group, version, namespace, plural))
    )
    try:
        objects = list(list_pages(call, *args, page_size=STATE_PAGE_SIZE, timeout=limits.timeout, limits=limits))
    except RequestRefused as exc:
        raise AuditSourceError(f"list {plural}: {exc} (the Kubernetes API at {api.configuration.host})") from None
    except client.ApiException as exc:
        if exc.status == 404:
            return []
        raise
    for obj in objects:
        obj["kind"] = kind
        index.apply(obj)
    return objects


def _list_call(api: Any, kind: str, namespace: str | None) -> tuple[Callable[..., Any], tuple[str, ...]]:
    """The typed client's list of a kind in `namespace` (None: every namespace), with its arguments."""
    lister = str(BY_KIND[kind].lister)
    if not BY_KIND[kind].namespaced:
        return getattr(api, lister), ()
    return namespaced(api, lister.removeprefix("list_").removesuffix("_for_all_namespaces"), namespace)


def exit_code(run: AuditRun) -> int:
    return EXIT_FINDINGS if run.findings else EXIT_CLEAN


def progress_to(stream: TextIO) -> Callable[[str], None]:
    def say(message: str) -> None:
        print(message, file=stream, flush=True)

    return say
