"""One report writer across replicas: two electors, each with its own client, against the fake API over HTTP.

A monitor samples both every few milliseconds: never do both hold the lease at once, and a successor holds it
within the lease duration after the leader died, lost the API, or was cut off from it; on release at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from testkit.fakeapi import FakeKubeAPI, Request
from tests.state.conftest import NAMESPACE, eventually, lease_holder
from webhook.audit.lease import LeaseElector
from webhook.settings import LeaseTiming
from webhook.state.apisource import load_configuration

TIMING = LeaseTiming(duration=1.0, renew_deadline=0.6, retry_period=0.1)
LEASE = "storage-affinity-webhook"


def api_client(fake: FakeKubeAPI, tmp_path: Path, agent: str) -> client.ApiClient:
    """A client of its own, as each replica has, named by its User-Agent for the fake's faults."""
    configuration, _ = load_configuration(fake.write_kubeconfig(tmp_path / f"kubeconfig-{agent}"))
    api = client.ApiClient(configuration)
    api.user_agent = agent
    return api


class Monitor:
    """Samples which electors hold the lease; remembers the most that ever held it at once."""

    def __init__(self, *electors: LeaseElector) -> None:
        self.electors = electors
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, sum(e.holds() for e in self.electors))
            time.sleep(0.002)

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def pair(fake_api: FakeKubeAPI, tmp_path: Path) -> Iterator[tuple[LeaseElector, LeaseElector]]:
    """Replica a takes the lease first; replica b competes from then on."""
    a = LeaseElector(api_client(fake_api, tmp_path, "replica-a"), NAMESPACE, LEASE, TIMING, holder="a").start()
    eventually(a.holds, what="a takes a fresh lease")
    b = LeaseElector(api_client(fake_api, tmp_path, "replica-b"), NAMESPACE, LEASE, TIMING, holder="b").start()
    yield a, b
    a.release()
    b.release()


def kill(elector: LeaseElector) -> None:
    """The process dies: no more renewals, and no release (which only a process on its way out sends)."""
    elector._stopped.set()


def from_(agent: str) -> Callable[[Request], bool]:
    """The fake API's requests of one replica (its User-Agent)."""
    return lambda r: r.agent == agent


def holder(fake: FakeKubeAPI) -> str:
    return lease_holder(fake, NAMESPACE, LEASE)


def test_the_lease_object_is_a_valid_lease(fake_api: FakeKubeAPI, pair: tuple[LeaseElector, LeaseElector]) -> None:
    lease = fake_api.get("Lease", NAMESPACE, LEASE)
    assert lease is not None
    spec = lease["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 1
    for key in ("acquireTime", "renewTime"):  # MicroTime, RFC 3339 with microseconds
        assert time.strptime(spec[key], "%Y-%m-%dT%H:%M:%S.%fZ")
    time.sleep(3 * TIMING.retry_period)
    assert not pair[1].holds() and holder(fake_api) == "a"  # renewed, never taken over


def test_the_leader_killed_a_successor_within_the_lease_duration(
    fake_api: FakeKubeAPI, pair: tuple[LeaseElector, LeaseElector]
) -> None:
    a, b = pair
    with Monitor(a, b) as monitor:
        kill(a)
        killed = time.monotonic()
        eventually(b.holds, timeout=3 * TIMING.duration, what="b takes the lease over")
        took = time.monotonic() - killed
    assert monitor.most == 1
    assert TIMING.renew_deadline <= took <= TIMING.duration + 2 * TIMING.retry_period + 0.2
    assert holder(fake_api) == "b"


def test_renewals_refused_the_leader_stops_before_the_successor_starts(
    fake_api: FakeKubeAPI, pair: tuple[LeaseElector, LeaseElector]
) -> None:
    a, b = pair
    with Monitor(a, b) as monitor:
        fake_api.fail(500, when=from_("replica-a"))
        refused = time.monotonic()
        eventually(lambda: not a.holds(), timeout=TIMING.renew_deadline + 0.2, what="a stops writing")
        eventually(b.holds, timeout=3 * TIMING.duration, what="b takes the expired lease")
        took = time.monotonic() - refused
        fake_api.fail(None)
        time.sleep(3 * TIMING.retry_period)  # a reaches the API again: it must not take the lease back
    assert monitor.most == 1
    assert took <= TIMING.duration + 2 * TIMING.retry_period + 0.2
    assert not a.holds() and b.holds() and holder(fake_api) == "b"


def test_a_partitioned_leader_stops_before_the_successor_starts(
    fake_api: FakeKubeAPI, pair: tuple[LeaseElector, LeaseElector]
) -> None:
    a, b = pair
    with Monitor(a, b) as monitor:
        with fake_api.holding(when=from_("replica-a")):  # a's requests go unanswered
            cut = time.monotonic()
            eventually(lambda: not a.holds(), timeout=TIMING.renew_deadline + 0.2, what="a stops writing")
            eventually(b.holds, timeout=3 * TIMING.duration, what="b takes the lease over")
            took = time.monotonic() - cut
        # The partition heals: a's renewal held in flight arrives late, names an old version and is refused.
        time.sleep(3 * TIMING.retry_period)
    assert monitor.most == 1
    assert took <= TIMING.duration + 2 * TIMING.retry_period + 0.2
    assert not a.holds() and b.holds() and holder(fake_api) == "b"


def test_release_hands_over_at_once(fake_api: FakeKubeAPI, pair: tuple[LeaseElector, LeaseElector]) -> None:
    a, b = pair
    with Monitor(a, b) as monitor:
        a.release()  # SIGTERM: stop writing, clear the holder
        assert not a.holds()
        released = time.monotonic()
        eventually(b.holds, timeout=TIMING.duration, what="b takes the released lease")
        took = time.monotonic() - released
    assert monitor.most == 1
    assert took <= 2 * TIMING.retry_period + 0.2  # its next try, not a lease duration later
    lease = fake_api.get("Lease", NAMESPACE, LEASE)
    assert lease is not None and lease["spec"]["leaseTransitions"] == 1


def test_racing_for_a_fresh_lease_one_wins(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    electors = [
        LeaseElector(api_client(fake_api, tmp_path, f"replica-{i}"), NAMESPACE, LEASE, TIMING, holder=str(i))
        for i in range(4)
    ]
    with Monitor(*electors) as monitor:
        for elector in electors:
            elector.start()
        eventually(lambda: any(e.holds() for e in electors), what="one of them takes the lease")
        time.sleep(5 * TIMING.retry_period)
        assert [e.holder for e in electors if e.holds()] == [holder(fake_api)]
    for elector in electors:
        elector.release()
    assert monitor.most == 1


def test_a_fractional_duration_is_declared_rounded_up(fake_api: FakeKubeAPI, tmp_path: Path) -> None:
    """leaseDurationSeconds is whole seconds: rounded down, others could take over while the holder still writes."""
    timing = LeaseTiming(duration=1.4, renew_deadline=1.2, retry_period=0.1)
    elector = LeaseElector(api_client(fake_api, tmp_path, "a"), NAMESPACE, LEASE, timing, holder="a")
    assert elector.try_once()
    lease = fake_api.get("Lease", NAMESPACE, LEASE)
    assert lease is not None and lease["spec"]["leaseDurationSeconds"] == 2
