"""Writes the audit's policy reports (content from rules/reports.py): one list, then only what changed.

Each run lists the reports this webhook owns (label `app.kubernetes.io/managed-by: storage-affinity-webhook`),
creates the missing ones, replaces those whose content differs (the stored resourceVersion makes the replace a
compare-and-swap) and deletes those of namespaces left without findings. A run with nothing changed makes no
write. Before each write it asks the lease how long it may still write (webhook/audit/lease.py) and bounds the
request by that: a replica that lost the lease stops mid-run.

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
from rules.model import Json, namespaced_name
from rules.reports import MANAGED_BY, REPORT_KINDS, SOURCE, ReportKind, build_reports, keep_timestamps, same_content
from webhook.state.apierrors import describe
from webhook.state.watch import list_pages

log = logging.getLogger(__name__)

#: The `--reports` choices.
MODES = ("auto", *REPORT_KINDS, "off")
LIST_PAGE = 100
DISCOVERY_TIMEOUT = 5.0
REQUEST_TIMEOUT = 10.0  # the longest a list page or a write may take, even with the lease held for longer


class NotLeader(Exception):
    """The lease ran out (or was never held): this replica must not write."""


@dataclass
class WriteCounts:
    created: int = 0
    replaced: int = 0
    deleted: int = 0
    unchanged: int = 0
    conflicts: int = 0

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
        stored = {namespaced_name(obj): obj for obj in self._list(kind)}
        desired = build_reports(audits, kind, int(time.time()), uids)
        for key, fresh in desired.items():
            old = stored.get(key)
            report = keep_timestamps(fresh, old)
            if old is not None and same_content(old, report):
                counts.unchanged += 1
                continue
            namespace, name = key
            try:
                if old is None:
                    self.objects.create_namespaced_custom_object(
                        kind.group, kind.version, namespace, kind.plural, report, _request_timeout=self._guard()
                    )
                    counts.created += 1
                else:
                    report["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                    self.objects.replace_namespaced_custom_object(
                        kind.group, kind.version, namespace, kind.plural, name, report, _request_timeout=self._guard()
                    )
                    counts.replaced += 1
            except ApiException as exc:
                if exc.status not in (404, 409):
                    raise
                counts.conflicts += 1  # changed meanwhile (by a former leader or a person): the next run corrects it
        for namespace, name in sorted(stored.keys() - desired.keys()):
            try:
                self.objects.delete_namespaced_custom_object(
                    kind.group, kind.version, namespace, kind.plural, name, _request_timeout=self._guard()
                )
                counts.deleted += 1
            except ApiException as exc:
                if exc.status != 404:
                    raise
        return counts

    def _guard(self) -> float:
        """The seconds the next request may take; NotLeader when the lease leaves none."""
        left = self.may_write()
        if left <= 0:
            raise NotLeader("the lease is not held: no report is written")
        return min(left, REQUEST_TIMEOUT)

    def _list(self, kind: ReportKind) -> Iterator[Json]:
        """The reports this webhook owns, page by page, each page bounded by what the lease leaves."""
        return list_pages(
            self.objects.list_custom_object_for_all_namespaces,
            kind.group,
            kind.version,
            kind.plural,
            page_size=LIST_PAGE,
            timeout=self._guard,
            label_selector=f"{MANAGED_BY}={SOURCE}",
        )
