"""Two real servers on one fake API: both answer admission, one writes the policy reports, SIGTERM hands over.

Each server runs two gunicorn workers (the per-replica audit lock picks one to compete for the Lease), audits
every half second and uses short lease timings so that a takeover fits in a test.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rules.reports import REPORT_NAME
from testkit.fakeapi import FakeKubeAPI, running_fake_api
from testkit.server import running_server
from tests.state.conftest import eventually, lease_holder, report_writes
from tests.support import DATA, EXAMPLES, manifest_objects

NAMESPACE = "saw-system"  # what testkit/server.py passes as --namespace
LEASE_DURATION = 3.0
ARGS: tuple[str, ...] = (
    "--audit-interval",
    "0.5",
    "--lease-duration",
    str(LEASE_DURATION),
    "--lease-renew-deadline",
    "2",
)
ARGS += ("--lease-retry-period", "0.2")


def cluster() -> list[dict[str, Any]]:
    return manifest_objects(EXAMPLES / "cluster.yaml", DATA / "audit" / "findings.yaml")


def holder(api: FakeKubeAPI) -> str:
    return lease_holder(api, NAMESPACE, "storage-affinity-webhook")


def test_one_server_writes_and_sigterm_hands_over_at_once(tmp_path: Path) -> None:
    with running_fake_api(*cluster()) as api:
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        with (
            running_server(tmp_path / "a", "--kubeconfig", kubeconfig, *ARGS, env={"POD_NAME": "server-a"}) as a,
            running_server(tmp_path / "b", "--kubeconfig", kubeconfig, *ARGS, env={"POD_NAME": "server-b"}) as b,
        ):
            first = eventually(lambda: holder(api), 10, "one server takes the lease")
            eventually(lambda: api.get("Report", "shop", REPORT_NAME), 10, "the holder writes the shop report")
            time.sleep(2)  # a few audits of both servers: the reports are written, then left alone
            settled = report_writes(api)
            time.sleep(2)
            assert report_writes(api) == settled, "an audit with nothing changed wrote reports"
            assert holder(api) == first

            leader, follower = (a, "server-b") if first.startswith("server-a_") else (b, "server-a")
            api.delete("Report", "shop", REPORT_NAME)  # to see who writes it again
            stopped = time.monotonic()
            leader.process.terminate()
            eventually(lambda: holder(api).startswith(f"{follower}_"), LEASE_DURATION, "the other server takes over")
            took = time.monotonic() - stopped
            eventually(lambda: api.get("Report", "shop", REPORT_NAME), 10, "the successor writes the report")
            assert leader.process.wait(timeout=30) == 0
    print(f"\nSIGTERM to the holder: the other server held the lease {took:.2f} s later")
    # The released lease is taken at the successor's next try, not after a lease duration.
    assert took < LEASE_DURATION
