"""What the stack's floor is made of: the server CPU a review costs before any rule runs, taken apart.

On the server, interleaved round by round, server CPU µs per request (master and worker, from /proc) and
requests/s under `wrk` with 16 kept-alive connections:

- `bare_post`: a bare WSGI callable (read the body, `json.loads`, answer a small AdmissionReview) served by the
  production gunicorn application itself, `webhook.serving.server.WebhookServer` with `load()` overridden: the same
  worker class, TLS context, keep-alive and worker count, started as `serve` is (`python -m bench.floor serve`);
- `webhook_allow`: `POST /allow` on the real server (`--trivial-endpoint`), the same body (answered by the
  review layer in front of Flask, webhook/app/endpoints.py `ReviewEndpoints`);
- `bare_get` and `webhook_healthz`: a GET with no body on each, for TLS + gunicorn (+ Flask, which serves
  health) without JSON.

In-process (a child process, monkey-patched by gevent as a worker is, with PROMETHEUS_MULTIPROC_DIR set as
`serve` sets it, so that the metrics write their mmap'd files as in production): the app's WSGI callable vs the
bare one on the same environ, stdlib `json` vs `orjson`, `json.loads` vs `decode_review`, and the metrics a
review updates.

`--profile DIR` also samples each worker under saturation with py-spy (when installed) and groups the samples
by layer. `python -m bench.floor` prints the result as JSON.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from webhook.serving.server import WebhookServer

if TYPE_CHECKING:
    from bench.servers import Running

CONNECTIONS = 16
# The answer of the bare app: what /allow answers, less the uid echoed from the request.
_ANSWER = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"allowed": True}}
_OK = b"ok\n"


def bare_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """The least a Python admission handler does: read the body, parse it, answer. Any GET is answered `ok`
    (the readiness probe, and the GET without a body)."""
    if environ["REQUEST_METHOD"] != "POST":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(_OK)))])
        return [_OK]
    review = json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)))
    answer = {**_ANSWER, "response": {"uid": review["request"]["uid"], "allowed": True}}
    body = json.dumps(answer, separators=(",", ":")).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


class BareServer(WebhookServer):
    """The production gunicorn application serving `bare_app`: only the WSGI callable differs. With no runtime,
    `loaded()` is true at once, so the worker accepts as soon as it has started."""

    def load(self) -> Any:
        return bare_app


def serve(argv: list[str]) -> int:
    """`python -m bench.floor serve`: takes the options testkit's `running_server` passes, runs as `run` does."""
    from webhook.logs import configure_logging
    from webhook.settings import Settings

    parser = argparse.ArgumentParser(prog="python -m bench.floor serve")
    parser.add_argument("--bind", required=True)
    parser.add_argument("--cert", required=True, type=Path)
    parser.add_argument("--key", required=True, type=Path)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--namespace", default="")
    args = parser.parse_args(argv)
    settings = Settings(cert=args.cert, key=args.key, bind=args.bind, workers=args.workers, namespace=args.namespace)
    configure_logging(settings.log_level)
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="saw-floor-metrics-")
    BareServer(settings).run()
    return 0


@contextmanager
def bare_server(tmp: Path, certs: Path) -> Iterator[Running]:
    from bench.servers import SERVER_CPUS, Running
    from testkit.server import running_server

    tmp.mkdir(parents=True)
    with running_server(tmp, workers=1, certs=certs, cpus=SERVER_CPUS, program="bench.floor") as server:
        yield Running(server, "bare")


# In-process costs: run in a child process, whose environment decides the metrics' mode at import.


def _drain(chunks: Iterable[bytes]) -> bytes:
    try:
        return b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def _start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
    assert status.startswith("200"), status


def inprocess_costs(body: bytes, seconds: float, *, metrics_only: bool = False) -> dict[str, Any]:
    """Best-of-rounds µs per call of each pair, measured as bench/handler.py measures the handler."""
    from bench.handler import _paired
    from webhook import metrics

    def pair(name: str, a: tuple[str, Callable[[], object]], b: tuple[str, Callable[[], object]]) -> None:
        first, second = _paired(a[1], b[1], seconds)
        out[name] = {a[0]: round(first, 2), b[0]: round(second, 2), "difference": round(second - first, 2)}

    out: dict[str, Any] = {"multiprocess_metrics": bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))}
    started = 0.0003

    def count() -> None:
        metrics.REQUESTS.labels("allow", "Pod", "CREATE", "allowed").inc()

    def observe() -> None:
        metrics.DURATION.labels("allow").observe(started)

    pair("metrics_per_review", ("requests_inc", count), ("duration_observe", observe))
    if metrics_only:
        return out

    from werkzeug.test import EnvironBuilder

    from bench import handler, workload
    from webhook.app.codec import decode_review
    from webhook.app.endpoints import create_app
    from webhook.policy.file import load_policy_file

    policy, _ = load_policy_file(workload.POLICY)
    app = create_app(handler.runtime_for(workload.base_objects(), policy), trivial_endpoint=True)
    post = EnvironBuilder(path="/allow", method="POST", data=body, content_type="application/json").get_environ()
    get = EnvironBuilder(path="/healthz", method="GET").get_environ()

    def call(wsgi: Callable[..., Iterable[bytes]], environ: dict[str, Any]) -> Callable[[], bytes]:
        def run() -> bytes:
            request = dict(environ)
            request["wsgi.input"] = io.BytesIO(body)
            return _drain(wsgi(request, _start_response))

        return run

    assert json.loads(call(app, post)())["response"]["allowed"] is True
    pair("wsgi_post_allow", ("bare", call(bare_app, post)), ("webhook", call(app, post)))
    pair("wsgi_get_healthz", ("bare", call(bare_app, get)), ("webhook", call(app, get)))
    pair("decode", ("json_loads", lambda: json.loads(body)), ("decode_review", lambda: decode_review(body)))
    review = json.loads(body)
    out["body_bytes"] = len(body)
    pair(
        "json_vs_orjson",
        ("json", lambda: json.dumps(json.loads(body))),
        ("orjson", lambda: orjson.dumps(orjson.loads(body))),
    )
    pair("dumps_vs_orjson", ("json", lambda: json.dumps(review)), ("orjson", lambda: orjson.dumps(review)))
    return out


def _inprocess(tmp: Path, body: Path, seconds: float, *, multiprocess: bool) -> dict[str, Any]:
    from testkit import ROOT

    env = {k: v for k, v in os.environ.items() if k.lower() != "prometheus_multiproc_dir"}
    command = [sys.executable, "-m", "bench.floor", "inprocess", str(body), "--seconds", str(seconds)]
    if multiprocess:
        metrics_dir = tmp / "inprocess-metrics"
        metrics_dir.mkdir(parents=True)
        env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    else:
        command.append("--metrics-only")
    out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    result: dict[str, Any] = json.loads(out)
    return result


# On the server.


def measure(tmp: Path, certs: Path, body: Path, *, seconds: float, rounds: int = 3) -> dict[str, Any]:
    """Server CPU µs per request and requests/s of the bare app and of the real server, interleaved; ratios per
    round; the in-process costs. `certs` holds a CA and serving certificate (testkit `issue_certs`)."""
    from bench import load, servers, workload

    result: dict[str, Any] = {
        "inprocess": _inprocess(tmp, body, seconds, multiprocess=True),
        "inprocess_metrics_in_memory": _inprocess(tmp, body, seconds / 3, multiprocess=False),
    }
    cluster = workload.EXAMPLES / "cluster.yaml"
    with (
        bare_server(tmp / "bare", certs) as bare,
        servers.static_server(tmp / "webhook", certs, cluster, workload.POLICY, workers=1) as hook,
    ):
        targets: dict[str, tuple[Running, str, Path | None]] = {
            "bare_post": (bare, "allow", body),
            "webhook_allow": (hook, "allow", body),
            "bare_get": (bare, "healthz", None),
            "webhook_healthz": (hook, "healthz", None),
        }
        for srv, endpoint, posted in targets.values():  # warm: imports, first handshakes, the metrics files
            load.wrk(srv.url(endpoint), posted, seconds=1, connections=CONNECTIONS)
        logs = {srv.name: srv.server.log.stat().st_size for srv in (bare, hook)}
        cpu: dict[str, list[float]] = {name: [] for name in targets}
        rps: dict[str, list[float]] = {name: [] for name in targets}
        errors = 0
        for _ in range(rounds):
            for name, (srv, endpoint, posted) in targets.items():
                run, cost = srv.measured(
                    partial(load.wrk, srv.url(endpoint), posted, seconds=seconds, connections=CONNECTIONS)
                )
                cpu[name].append(cost)
                rps[name].append(run.rps)
                errors += run.errors
        result["log_bytes_during_rounds"] = {
            srv.name: srv.server.log.stat().st_size - logs[srv.name] for srv in (bare, hook)
        }
    result["server"] = {
        name: {
            "cpu_us_per_request": round(statistics.median(cpu[name]), 1),
            "cpu_us_rounds": [round(x, 1) for x in cpu[name]],
            "rps": round(statistics.median(rps[name])),
            "rps_rounds": [round(x) for x in rps[name]],
        }
        for name in targets
    }
    result["server_ratios"] = {
        "webhook_allow_over_bare_post": _per_round(cpu["webhook_allow"], cpu["bare_post"], ratio=True),
        "webhook_allow_minus_bare_post_us": _per_round(cpu["webhook_allow"], cpu["bare_post"]),
        "webhook_healthz_minus_bare_get_us": _per_round(cpu["webhook_healthz"], cpu["bare_get"]),
        "bare_post_minus_bare_get_us": _per_round(cpu["bare_post"], cpu["bare_get"]),
        "bare_post_share_of_webhook_allow": _per_round(cpu["bare_post"], cpu["webhook_allow"], ratio=True),
    }
    result["errors"] = errors
    result["settings"] = {"seconds": seconds, "rounds": rounds, "connections": CONNECTIONS}
    return result


def _per_round(a: list[float], b: list[float], *, ratio: bool = False) -> dict[str, Any]:
    """a/b (or a-b) round by round: the median and the spread, each round comparing runs seconds apart."""
    values = [x / y if ratio else x - y for x, y in zip(a, b, strict=True)]
    digits = 3 if ratio else 1
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


# Where a saturated worker spends its time: py-spy samples grouped by layer.

#: Layers, each the files (as py-spy names them: relative to site-packages or the standard library) whose
#: names start with one of its prefixes. A sample with a frame in metrics, JSON or TLS belongs to the first of
#: those (what they call, a gevent lock or a Python helper, is their cost); any other to the layer of its
#: innermost frame in a layer listed: the caller of a helper from the standard library pays for it.
CALLEES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("prometheus metrics", ("prometheus_client/", "webhook/metrics.py")),
    ("JSON", ("json/", "rules/safeload.py")),
    ("TLS", ("ssl.py", "gevent/ssl.py", "gevent/_ssl3.py")),
)
CALLERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gunicorn HTTP", ("gunicorn/",)),
    ("Flask/werkzeug", ("flask/", "werkzeug/")),
    ("gevent hub", ("gevent/", "greenlet")),
    ("our code", ("webhook/", "rules/", "certs/", "bench/")),
)


def group_samples(raw: str) -> dict[str, Any]:
    """Shares of py-spy's `--format raw` samples (`frame;frame;... count`, outermost first, each frame
    `function (file:line)`) by layer (CALLEES, CALLERS), by file and by function of the innermost frame."""
    layers: Counter[str] = Counter()
    files: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, number = line.rpartition(" ")
        if not stack or not number.isdigit():
            continue
        count = int(number)
        frames = stack.split(";")
        total += count
        leaves[frames[-1].rsplit(":", 1)[0] + ")"] += count  # the function, whatever its line
        files[_file(frames[-1])] += count
        layers[_layer(frames)] += count
    if not total:
        return {"samples": 0}

    def shares(counter: Counter[str], most: int | None = None) -> dict[str, float]:
        return {key: round(n / total, 3) for key, n in counter.most_common(most)}

    return {"samples": total, "layers": shares(layers), "files": shares(files, 15), "functions": shares(leaves, 20)}


def _file(frame: str) -> str:
    return frame[frame.rfind("(") + 1 :].rsplit(":", 1)[0]


def _layer(frames: list[str]) -> str:
    paths = [_file(frame) for frame in frames]
    for layer, prefixes in CALLEES:
        if any(path.startswith(prefixes) for path in paths):
            return layer
    for path in reversed(paths):
        for layer, prefixes in CALLERS:
            if path.startswith(prefixes):
                return layer
    return "other"


def profile(srv: Running, endpoint: str, body: Path | None, seconds: float, out: Path) -> dict[str, Any]:
    """py-spy on the worker while `wrk` saturates it; the raw samples are kept in `out`."""
    from bench import load, servers

    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if py_spy is None:
        return {"error": "py-spy is not installed"}
    (worker,) = servers.worker_pids(srv.server.process.pid)
    command = [py_spy, "record", "--pid", str(worker), "--duration", str(max(1, round(seconds))), "--rate", "250"]
    spy = subprocess.Popen(
        [*command, "--format", "raw", "--output", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    run = load.wrk(srv.url(endpoint), body, seconds=seconds + 2, connections=CONNECTIONS)
    message = spy.communicate(timeout=60)[0].decode(errors="replace")
    if spy.returncode != 0 or not out.is_file():
        return {"error": message[-500:]}
    return {"rps_while_sampled": round(run.rps), **group_samples(out.read_text())}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        return serve(argv[1:])
    if argv[:1] == ["inprocess"]:
        from gevent import monkey

        monkey.patch_all()  # as the worker does: the metrics' locks, for one, become gevent's
        child = argparse.ArgumentParser(prog="python -m bench.floor inprocess")
        child.add_argument("body", type=Path)
        child.add_argument("--seconds", type=float, default=1.0)
        child.add_argument("--metrics-only", action="store_true")
        args = child.parse_args(argv[1:])
        costs = inprocess_costs(args.body.read_bytes(), args.seconds, metrics_only=args.metrics_only)
        print(json.dumps(costs))
        return 0

    from bench import load, servers, workload
    from testkit.server import issue_certs

    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each load run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the four server runs")
    parser.add_argument("--review", default="mover", choices=sorted(workload.PATHS), help="the review posted")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="also profile each worker with py-spy, into DIR")
    args = parser.parse_args(argv)
    load.require("wrk")
    servers.off_server_cpus()
    with tempfile.TemporaryDirectory(prefix="saw-floor-") as tmp_dir:
        tmp = Path(tmp_dir)
        body = workload.review_file(tmp, args.review)
        certs = tmp / "certs"
        issue_certs(certs)
        result = {"review": args.review, **measure(tmp, certs, body, seconds=args.seconds, rounds=args.rounds)}
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            cluster = workload.EXAMPLES / "cluster.yaml"
            with (
                bare_server(tmp / "bare-profiled", certs) as bare,
                servers.static_server(tmp / "webhook-profiled", certs, cluster, workload.POLICY, workers=1) as hook,
            ):
                result["profile"] = {
                    "bare_post": profile(bare, "allow", body, args.seconds, args.profile / "bare_post.txt"),
                    "webhook_allow": profile(hook, "allow", body, args.seconds, args.profile / "webhook_allow.txt"),
                }
    print(json.dumps(result, indent=2))
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
