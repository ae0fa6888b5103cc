"""Writes the audit's policy reports (content from rules/reports.py): one paged list, then only what changed.

The writer touches only the reports it created: named `storage-affinity-webhook` (rules/reports.py REPORT_NAME),
labelled `app.kubernetes.io/managed-by: storage-affinity-webhook`, and with the UID it remembers from its own create
(a replace keeps it). A label can be copied and a name chosen by anyone who may create reports in a namespace; a
UID cannot. Each run lists only reports of that name and label (a field and a label selector), a page of LIST_PAGE
at a time, and forgets each body once compared: tenants' reports of other names are never read, and no more than
one page of bodies is held. It creates the missing reports, replaces those whose content differs (the stored
resourceVersion makes the replace a compare-and-swap) and deletes its own in namespaces left without findings (with
the UID and resourceVersion as preconditions). A run with nothing changed makes no write.

A report at that name it did not create (unlabelled, or labelled with a UID it does not know) is a squatter: left
alone, counted in `storage_affinity_report_squatters` and logged once, while that namespace's findings stay
unpublished. What a writer remembers starts on its first run, or after it lost the lease (`forget()`): then it
adopts the labelled reports of its name, since no process remembers who created them.

Before each request it asks the lease how long it may still write (webhook/audit/lease.py) and bounds the request by
that: a replica that lost the lease stops mid-run.

The API is the `--reports` setting: `openreports` (openreports.io/v1alpha1 Report), `wgpolicyk8s`
(wgpolicyk8s.io/v1alpha2 PolicyReport), `off`, or `auto`: whichever discovery finds served, OpenReports first,
asked again at each run until one is (the CRDs may be installed after the webhook).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from kubernetes import client
from kubernetes.client import ApiException

from rules.audit import ObjectAudit
from rules.model import Json
from rules.reports import (
    MANAGED_BY,
    REPORT_KINDS,
    REPORT_NAME,
    SOURCE,
    ReportKind,
    build_reports,
    keep_timestamps,
    same_content,
)
from webhook import metrics
from webhook.audit.lease import NotLeader, write_time
from webhook.state.apierrors import describe
from webhook.state.watch import list_pages

log = logging.getLogger(__name__)

#: The `--reports` choices.
MODES = ("auto", *REPORT_KINDS, "off")
#: Reports per list page: the most bodies held at once (a squatter's may be 1.5 MiB, etcd's object limit).
LIST_PAGE = 20
#: The squatters named in one log line; the rest are counted.
SQUATTERS_LOGGED = 5
DISCOVERY_TIMEOUT = 5.0
REQUEST_TIMEOUT = 10.0  # the longest a list page or a write may take, even with the lease held for longer


@dataclass
class WriteCounts:
    created: int = 0
    replaced: int = 0
    deleted: int = 0
    unchanged: int = 0
    conflicts: int = 0
    squatters: int = 0  # namespaces whose report name is held by a report this writer did not create

    @property
    def writes(self) -> int:
        return self.created + self.replaced + self.deleted


class ReportWriter:
    """`may_write()` is how many seconds this process may still write (the lease's `remaining`)."""

    def __init__(self, api: client.ApiClient, mode: str, may_write: Callable[[], float]) -> None:
        if mode not in MODES:
            raise ValueError(f"reports: {mode!r} is not one of {', '.join(MODES)}")
        self.objects = client.CustomObjectsApi(api)
        self.mode = mode
        self.may_write = may_write
        self._kind: ReportKind | None = None
        self._ours: dict[str, str] | None = None  # namespace → UID of the report this writer created there
        self._squatters_logged: set[str] = set()

    def kind(self) -> ReportKind | None:
        """The report API to write, or None (off, or none served yet)."""
        if self.mode == "off":
            return None
        if self._kind is None:
            candidates = list(REPORT_KINDS.values()) if self.mode == "auto" else [REPORT_KINDS[self.mode]]
            self._kind = next((kind for kind in candidates if self._served(kind)), None)
            if self._kind is not None:
                log.info("policy reports: %s %s", self._kind.api_version, self._kind.kind)
        return self._kind

    def _served(self, kind: ReportKind) -> bool:
        try:
            found = self.objects.get_api_resources(kind.group, kind.version, _request_timeout=DISCOVERY_TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                log.warning("policy reports: discovery of %s failed: %s", kind.api_version, describe(exc))
            return False
        except Exception as exc:
            log.warning("policy reports: discovery of %s failed: %s", kind.api_version, describe(exc))
            return False
        return any(resource.name == kind.plural for resource in found.resources or ())

    def write(
        self, audits: Iterable[ObjectAudit], uids: Mapping[tuple[str, str, str], str] | None = None
    ) -> WriteCounts:
        """Make the stored reports say what `audits` found. Raises NotLeader when the lease ran out first."""
        counts = WriteCounts()
        kind = self.kind()
        if kind is None:
            return counts
        self._guard()
        desired = {
            namespace: report for (namespace, _), report in build_reports(audits, kind, int(time.time()), uids).items()
        }
        adopting = self._ours is None
        known = self._ours or {}
        ours: dict[str, str] = {}  # what this run leaves: namespace → UID of its report there
        squatted: list[str] = []
        try:
            for stored in self._list(kind):
                metadata = stored.get("metadata") or {}
                namespace, uid = str(metadata.get("namespace") or ""), str(metadata.get("uid") or "")
                if not adopting and known.get(namespace) != uid:
                    if namespace in desired:
                        del desired[namespace]  # not ours: never replaced, and a create would conflict
                        squatted.append(namespace)
                    continue
                if self._settle(kind, namespace, stored, desired.pop(namespace, None), counts):
                    ours[namespace] = uid
            for namespace, report in desired.items():
                if (created := self._create(kind, namespace, report, counts)) is not None:
                    ours[namespace] = created
                else:
                    squatted.append(namespace)
        except NotLeader:
            self.forget()
            raise
        except Exception:  # a failed request: what this run created is remembered for the next one
            self._ours = None if adopting else {**known, **ours}
            raise
        self._ours = ours
        counts.squatters = len(squatted)
        self._report_squatters(kind, squatted)
        return counts

    def forget(self) -> None:
        """Forget which reports this writer created (it lost the lease: another replica may have written since)."""
        self._ours = None

    def _settle(self, kind: ReportKind, namespace: str, stored: Json, fresh: Json | None, counts: WriteCounts) -> bool:
        """Make one report of this writer say `fresh`, or delete it when None; False when it is gone after."""
        metadata = stored["metadata"]
        try:
            if fresh is None:
                preconditions = client.V1Preconditions(
                    uid=metadata["uid"], resource_version=metadata["resourceVersion"]
                )
                self.objects.delete_namespaced_custom_object(
                    kind.group,
                    kind.version,
                    namespace,
                    kind.plural,
                    REPORT_NAME,
                    body=client.V1DeleteOptions(preconditions=preconditions),
                    _request_timeout=self._guard(),
                )
                counts.deleted += 1
                return False
            report = keep_timestamps(fresh, stored)
            if same_content(stored, report):
                counts.unchanged += 1
                return True
            report["metadata"]["resourceVersion"] = metadata["resourceVersion"]
            report["metadata"]["uid"] = metadata["uid"]
            self.objects.replace_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, REPORT_NAME, report, _request_timeout=self._guard()
            )
            counts.replaced += 1
            return True
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
            counts.conflicts += 1  # changed or deleted meanwhile: the next run sees what is there
            return bool(exc.status == 409)

    def _create(self, kind: ReportKind, namespace: str, report: Json, counts: WriteCounts) -> str | None:
        """Create a namespace's report; its UID, or None when a report this writer did not create holds the name."""
        try:
            created = self.objects.create_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, report, _request_timeout=self._guard()
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            return None
        counts.created += 1
        assert isinstance(created, dict)
        return str(created["metadata"]["uid"])

    def _report_squatters(self, kind: ReportKind, squatted: list[str]) -> None:
        """The squatters as a metric, and a log line naming those not named before."""
        metrics.REPORT_SQUATTERS.set(len(squatted))
        new = sorted(set(squatted) - self._squatters_logged)
        self._squatters_logged = set(squatted)
        if new:
            named = ", ".join(new[:SQUATTERS_LOGGED]) + (
                f" and {len(new) - SQUATTERS_LOGGED} more" if len(new) > SQUATTERS_LOGGED else ""
            )
            log.warning(
                "policy reports: a %s named %s that this writer did not create holds the name in namespace %s; "
                "their findings are not published until it is deleted",
                kind.kind,
                REPORT_NAME,
                named,
            )

    def _guard(self) -> float:
        """The seconds the next request may take; NotLeader when the lease leaves none."""
        return write_time(self.may_write, REQUEST_TIMEOUT, "report")

    def _list(self, kind: ReportKind) -> Iterator[Json]:
        """The reports of this writer's name and label, page by page, each page bounded by what the lease leaves."""
        return list_pages(
            self.objects.list_custom_object_for_all_namespaces,
            kind.group,
            kind.version,
            kind.plural,
            page_size=LIST_PAGE,
            timeout=self._guard,
            label_selector=f"{MANAGED_BY}={SOURCE}",
            field_selector=f"metadata.name={REPORT_NAME}",
        )
