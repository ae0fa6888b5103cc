"""One writer across replicas: a `coordination.k8s.io/v1` Lease, held by at most one replica's audit at a time.

Every replica answers admission and audits; only the holder writes policy reports. The loop is written here on the
Lease API rather than taken from `kubernetes.leaderelection`, because that module cannot promise what the writer
needs: it answers no "may I still write?" (a callback thread runs on after a failed renewal until the renew loop
gives up), it never releases the lease on shutdown (a successor waits a whole lease duration), and it stops
competing for good once it lost the lease.

The promise, as client-go's leaderelection makes it: a replica that renewed (or took) the lease with a request
sent at `t` may write until `t + renew_deadline`; another replica takes the lease only after it has seen the
same record unchanged for the record's `leaseDurationSeconds` (by its own clock: clocks of different machines
never compare), which starts after that request reached the API server. With `renew_deadline < lease_duration`
the old holder has stopped writing before anyone else can start, however the renewal failed (API down, a
partition, a slow answer). The margin between the two also covers a write already in flight. Takeover is a
compare-and-swap on the Lease's resourceVersion: of two replicas racing for it, one gets 409 Conflict.
On shutdown the holder stops writing, then clears `holderIdentity`: the others take over at their next try.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client import ApiException

from webhook.settings import LeaseTiming
from webhook.state.apierrors import describe

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "coordination.k8s.io", "v1", "leases"


class NotLeader(Exception):
    """The lease ran out (or was never held): this replica must not write."""


def write_time(may_write: Callable[[], float], limit: float, what: str) -> float:
    """The seconds the next write may take: what the lease leaves (`may_write`, a LeaseElector's `remaining`), at
    most `limit`. NotLeader when it leaves none; `what` names what is then not written."""
    left = may_write()
    if left <= 0:
        raise NotLeader(f"the lease is not held: no {what} is written")
    return min(left, limit)


def instance() -> str:
    """This replica: the pod name (the chart's POD_NAME), else the host. An Event's `reportingInstance`."""
    return os.environ.get("POD_NAME") or socket.gethostname()


def identity() -> str:
    """This process among all replicas: the replica and a per-process suffix, as client-go's leader election
    names a holder."""
    return f"{instance()}_{uuid.uuid4().hex[:10]}"


def micro_time(at: datetime | None = None) -> str:
    """A MicroTime (a Lease's renewTime, an Event's eventTime): `at`, else now, in UTC to the microsecond."""
    return (at or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    """Competes for the Lease `namespace/name` in a thread; `remaining()` is how long this process may still write."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        timing: LeaseTiming,
        *,
        holder: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.namespace, self.name, self.timing = namespace, name, timing
        self.holder = holder or identity()
        self.clock = clock
        self._valid_until = 0.0
        self._observed: tuple[str, str, str] | None = None  # (holder, renewTime, resourceVersion) last seen
        self._observed_at = 0.0
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the writer asks ------------------------------------------------------------------------------

    def remaining(self) -> float:
        """Seconds this process may still write (0: it must not)."""
        return max(0.0, self._valid_until - self.clock())

    def holds(self) -> bool:
        return self.remaining() > 0

    # -- the loop --------------------------------------------------------------------------------------------

    def start(self) -> LeaseElector:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="lease", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                self.try_once()
            except Exception:  # the loop must outlive any one failure; the deadline keeps writes safe meanwhile
                log.exception("lease %s/%s: unexpected failure", self.namespace, self.name)
            self._stopped.wait(self.timing.retry_period)

    def try_once(self) -> bool:
        """Take or renew the lease once; True when this process holds it now."""
        sent = self.clock()
        timeout = self.timing.renew_deadline / 2
        try:
            lease = self._get(timeout)
        except ApiException as exc:
            if exc.status != 404:
                return self._failed("read", exc)
            return self._write(sent, None, timeout)
        except Exception as exc:  # urllib3 errors: the API is unreachable or slow
            return self._failed("read", exc)
        spec = lease.get("spec") or {}
        current = str(spec.get("holderIdentity") or "")
        record = (current, str(spec.get("renewTime") or ""), str((lease.get("metadata") or {}).get("resourceVersion")))
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        if current and current != self.holder:
            self._valid_until = 0.0  # someone else holds it (we may have lost it without noticing a failure)
            declared = float(spec.get("leaseDurationSeconds") or self.timing.duration)
            if self.clock() - self._observed_at < declared:
                return False
            log.info("lease %s/%s: %s let it expire, taking it", self.namespace, self.name, current)
        return self._write(sent, lease, timeout)

    def _get(self, timeout: float) -> dict[str, Any]:
        found = self.objects.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, self.name, _request_timeout=timeout
        )
        assert isinstance(found, dict)
        return found

    def _write(self, sent: float, lease: dict[str, Any] | None, timeout: float) -> bool:
        now = micro_time()
        spec: dict[str, Any] = dict((lease or {}).get("spec") or {})
        taking = spec.get("holderIdentity") != self.holder
        # Whole seconds (int32 in the API), rounded up: others must never wait less than this holder writes.
        declared = math.ceil(self.timing.duration)
        spec.update(holderIdentity=self.holder, leaseDurationSeconds=declared, renewTime=now)
        if taking:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if lease is not None else 0)
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        body: dict[str, Any] = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Lease", "metadata": metadata, "spec": spec}
        try:
            if lease is None:
                self.objects.create_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, PLURAL, body, _request_timeout=timeout
                )
            else:
                metadata["resourceVersion"] = lease["metadata"]["resourceVersion"]
                self.objects.replace_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, PLURAL, self.name, body, _request_timeout=timeout
                )
        except Exception as exc:  # 409: another replica changed it first; anything else: not renewed
            return self._failed("take" if taking else "renew", exc)
        if taking:
            log.info("lease %s/%s: held by %s", self.namespace, self.name, self.holder)
        self._valid_until = sent + self.timing.renew_deadline
        return True

    def _failed(self, what: str, exc: BaseException) -> bool:
        if self.holds():
            log.warning("lease %s/%s: cannot %s it: %s", self.namespace, self.name, what, describe(exc))
        return False

    # -- shutdown --------------------------------------------------------------------------------------------

    def release(self) -> None:
        """Stop competing; if this process holds the lease, stop writing and clear the holder for a successor."""
        self._stopped.set()
        held = self.holds()
        self._valid_until = 0.0
        if not held:
            return
        try:
            lease = self._get(self.timing.retry_period)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.holder:
                return
            now = micro_time()
            lease["spec"] = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now}
            self.objects.replace_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, self.name, lease, _request_timeout=self.timing.retry_period
            )
            log.info("lease %s/%s: released", self.namespace, self.name)
        except Exception as exc:  # the lease then expires by itself
            log.warning("lease %s/%s: cannot release it: %s", self.namespace, self.name, describe(exc))


#: The electors of this process, released by the worker on its way out (webhook/serving/server.py).
_ELECTORS: list[LeaseElector] = []


def register(elector: LeaseElector) -> LeaseElector:
    _ELECTORS.append(elector)
    return elector


def release_all() -> None:
    for elector in _ELECTORS:
        elector.release()
