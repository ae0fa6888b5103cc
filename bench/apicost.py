"""`python -m bench.apicost`: what a hostile tenant's objects cost the API server and the report writer.

Two measurements, against the fake API over HTTP (testkit/fakeapi/):
- a real gunicorn server with one worker on live state: a pod naming 1,000 claims that do not exist, reviewed
  twice by /mutate and twice by /validate (a controller retrying it); the API calls each review made, counted at
  the fake API, against the per-review budget of GETs (webhook/state/lookups.py), and each review's latency;
- the report writer in a process of its own, with twenty 1 MB Reports carrying its label in tenants' namespaces:
  its peak memory (tracemalloc, and the process's peak RSS) over two runs, and how many tenant Reports it deleted.

The objects are testkit's, as tests/state/test_lookup_budget.py and test_report_writer.py build them.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from kubernetes import client

from bench import servers, workload
from bench.hostile import TARGET_S
from bench.report import header, save, step, table, target
from testkit import hostile
from testkit.fakeapi import FakeKubeAPI, running_fake_api
from testkit.reports import create_tenant_reports, runs_beside_tenants
from testkit.server import Server, issue_certs
from webhook.audit.reports import ReportWriter
from webhook.state.apisource import load_configuration
from webhook.state.lookups import REVIEW_GETS

CLAIMS = 1_000  # the most volumes the review budget lets a pod have (rules/budget.py MAX_VOLUMES)
NODES = 1_000
TENANT_REPORTS, TENANT_REPORT_BYTES = 20, 1024 * 1024
#: The issue's bound on the writer: under this with the tenants' Reports present (the chart's limit is 512 Mi).
WRITER_LIMIT_MB = 100


def _calls(api: FakeKubeAPI) -> int:
    """The requests that are not watches: every GET, list and write made so far."""
    return sum(not r.watch for r in list(api.requests))


def missing_claims(tmp: Path, certs: Path) -> dict[str, Any]:
    """Two reviews per endpoint of a pod naming CLAIMS missing claims, through a live server with no audit and
    no reports (so every call the fake API counts meanwhile is the review's)."""
    objects = [*hostile.nodes(NODES), hostile.storage_class(), hostile.claim_object(hostile.CLAIM)]
    extra = ("--audit-interval", "0", "--reports", "off")
    with servers.live_server(tmp, certs, objects, workload.POLICY, "missing claims", extra=extra) as srv:
        assert srv.api is not None
        _wait_listed(srv.server)
        claims = [f"missing-{i:04d}" for i in range(CLAIMS)]
        session = srv.server.session()
        session.get(f"{srv.server.url}/healthz", timeout=30).raise_for_status()  # the TLS handshake is not timed
        rows = []
        for endpoint in ("mutate", "validate"):
            for attempt in range(2):  # the same pod again, as a controller retrying it sends it
                pod = hostile.claims_pod(f"claims-{endpoint}-{attempt}", claims)
                body = orjson.dumps(workload.review(pod))  # from VolSync's service account, as its movers come
                before = _calls(srv.api)
                started = time.perf_counter()
                response = session.post(
                    srv.url(endpoint), data=body, headers={"Content-Type": "application/json"}, timeout=60
                )
                seconds = time.perf_counter() - started
                answer = response.json()["response"]
                rows.append(
                    {
                        "endpoint": endpoint,
                        "review": attempt + 1,
                        "api_calls": _calls(srv.api) - before,
                        "seconds": round(seconds, 4),
                        "body_kb": round(len(body) / 1024),
                        "allowed": answer["allowed"],
                        "warnings": len(answer.get("warnings") or []),
                    }
                )
        session.close()
    return {"claims": CLAIMS, "nodes": NODES, "review_gets": REVIEW_GETS, "reviews": rows}


def _wait_listed(server: Server, timeout: float = 60.0) -> None:
    """Until /readyz says the optional groups are discovered and listed too: their first lists are no review's."""
    session = server.session()
    deadline = time.monotonic() + timeout
    while "pending" in (text := session.get(f"{server.url}/readyz", timeout=5).text):
        if time.monotonic() > deadline:
            raise RuntimeError(f"not listed within {timeout} s: {text}")
        time.sleep(0.1)
    session.close()


def tenant_reports(tmp: Path) -> dict[str, Any]:
    """The writer in a process of its own (its RSS is its alone) against a fake API holding TENANT_REPORTS tenant
    Reports of TENANT_REPORT_BYTES with its label; the Reports counted before and after."""
    with running_fake_api() as api:
        tenant = create_tenant_reports(api, TENANT_REPORTS, TENANT_REPORT_BYTES)
        report_bytes = len(orjson.dumps(api.get("Report", *min(tenant))))
        kubeconfig = api.write_kubeconfig(tmp / "kubeconfig-writer")
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            runs = pool.apply(_writer_runs, (str(kubeconfig),))
        left = sum(api.get("Report", namespace, name) is not None for namespace, name in tenant)
        served = api.listed["reports"]
    return {
        "tenant_reports": len(tenant),
        "tenant_report_bytes": report_bytes,
        **runs,
        "tenant_reports_deleted": len(tenant) - left,
        "report_bodies_listed": served,
    }


def _writer_runs(kubeconfig: str) -> dict[str, Any]:
    """The test's two runs of a writer with the lease held (testkit.reports.runs_beside_tenants), and the peak RSS
    of this process during them."""
    configuration, _ = load_configuration(Path(kubeconfig))
    writer = ReportWriter(client.ApiClient(configuration), "auto", lambda: math.inf)
    writer.kind()  # discovery before the measurement
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here: the runs' peak, not the imports'
    rss_before = servers.rss_mb(os.getpid())
    runs = runs_beside_tenants(writer)
    return {
        "created": runs.first.created,
        "deleted_own": runs.second.deleted,
        "squatters": runs.first.squatters + runs.second.squatters,
        "traced_peak_mb": round(max(runs.first_peak, runs.second_peak) / 2**20, 2),
        "rss_before_mb": round(rss_before, 1),
        "rss_peak_mb": round(servers.rss_mb(os.getpid(), "VmHWM"), 1),
    }


def measure(tmp: Path, certs: Path) -> dict[str, Any]:
    step(f"a pod naming {CLAIMS:,} missing claims, reviewed twice per endpoint: API calls and latency")
    result: dict[str, Any] = {"missing_claims": missing_claims(tmp / "claims", certs)}
    step(f"the report writer with {TENANT_REPORTS} tenant Reports of 1 MB carrying its label")
    result["tenant_reports"] = tenant_reports(tmp)
    result["targets"] = targets(result)
    return result


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    claims = result["missing_claims"]
    out = []
    for r in claims["reviews"]:
        what = f"/{r['endpoint']} of a pod naming {claims['claims']:,} missing claims, review {r['review']}"
        out.append(target(f"{what}: API calls", r["api_calls"], REVIEW_GETS))
        out.append(target(f"{what}: latency", r["seconds"], TARGET_S, unit=" s"))
    first = claims["reviews"][0]["api_calls"]
    out.append(target("the first review looked claims up (the measurement is not vacuous)", first, 1, at_most=False))
    writer = result["tenant_reports"]
    out += [
        target(
            "report writer: traced peak with twenty 1 MB tenant Reports",
            writer["traced_peak_mb"],
            WRITER_LIMIT_MB,
            unit=" MB",
        ),
        target("report writer: process peak RSS with them", writer["rss_peak_mb"], WRITER_LIMIT_MB, unit=" MB"),
        target("report writer: tenant Reports deleted", writer["tenant_reports_deleted"], 0),
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.apicost", description=__doc__)
    parser.add_argument("--keep", metavar="NAME", help="also write bench/results/NAME.json")
    args = parser.parse_args(argv)
    servers.off_server_cpus()
    with tempfile.TemporaryDirectory(prefix="saw-apicost-") as tmp_dir:
        tmp = Path(tmp_dir)
        issue_certs(tmp / "certs")
        result = header(**measure(tmp, tmp / "certs"))
    save(result, keep=args.keep, latest="apicost-latest")
    print(table(result["targets"]))
    return 0 if all(t["met"] for t in result["targets"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
