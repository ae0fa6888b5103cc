"""Handler cost in-process: what one review costs our code, as a ratio to the JSON floor.

The floor is `json.loads` + `json.dumps` of the same review: any Python handler pays it. Our path is what the
view runs between the socket and the response: decode the review, run the endpoint's rules, build and serialize
the response — the same functions, called in the same order, without Flask and the network around them.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from functools import partial

from rules.model import Json
from rules.policy import Policy
from rules.safeload import dump_json
from webhook.app.codec import build_response, decode_review
from webhook.app.endpoints import ENDPOINTS
from webhook.runtime import Runtime
from webhook.state.index import ClusterIndex


def runtime_for(objects: list[Json], policy: Policy) -> Runtime:
    index = ClusterIndex()
    for obj in objects:
        index.apply(obj)
    return Runtime(policy=policy, view=index, namespace="storage-affinity")


def answering(endpoint: str, runtime: Runtime) -> Callable[[bytes], bytes]:
    """What the view runs for `endpoint` between the socket and the response: decode the review, run its rules,
    build and serialize the response with the view's own writer, `dump_json` (what this module times and
    bench/instructions.py counts)."""
    served = ENDPOINTS[endpoint]
    handler, mutating = served.handler, served.mutating

    def answer(body: bytes) -> bytes:
        request = decode_review(body)
        return dump_json(build_response(request, handler(request, runtime), mutating=mutating))

    return answer


def _paired(floor: Callable[[], object], ours: Callable[[], object], seconds: float) -> tuple[float, float]:
    """Best per-call time (µs) of each over 15 alternating rounds.

    Alternating rounds see the same machine state; the minimum is the estimate least disturbed by other load
    (noise only ever adds time). CPU time of this thread, not wall time: other processes do not count.
    """
    floor()
    ours()
    started, calls = time.thread_time(), 0
    while time.thread_time() - started < seconds / 15:
        floor()
        ours()
        calls += 1
    per_round = max(10, calls // 2)
    best = [float("inf"), float("inf")]
    gc.collect()
    for _ in range(15):
        for i, fn in enumerate((floor, ours)):
            t0 = time.thread_time()
            for _ in range(per_round):
                fn()
            best[i] = min(best[i], (time.thread_time() - t0) / per_round * 1e6)
    return best[0], best[1]


def handler_costs(bodies: dict[str, bytes], runtime: Runtime, seconds: float = 1.0) -> list[Json]:
    """One row per (endpoint, rule path): our µs, the floor's µs and their ratio."""
    rows: list[Json] = []
    for path, body in bodies.items():
        for endpoint in ("mutate", "validate"):
            ours = partial(answering(endpoint, runtime), body)

            def floor_fn(body: bytes = body) -> str:
                return json.dumps(json.loads(body))

            floor, cost = _paired(floor_fn, ours, seconds)
            rows.append(
                {
                    "endpoint": endpoint,
                    "path": path,
                    "us": round(cost, 1),
                    "floor_us": round(floor, 1),
                    "ratio": round(cost / floor, 2),
                }
            )
    return rows
