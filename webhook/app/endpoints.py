"""Flask app factory: the admission endpoints, health, readiness and metrics.

Errors are mapped to HTTP answers in one place (`_error`): a body that is not an AdmissionReview gets 400 with a
plain-text reason, an oversized one 413; a review always gets HTTP 200 with an AdmissionReview, even when a rule
fails (the pipeline turns that into the policy's `onLookupFailure`), except while no valid policy is in effect:
then 503 with the reason, and kube-apiserver applies the webhook's failurePolicy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from flask import Flask, Response
from werkzeug.exceptions import HTTPException

from rules import pipeline
from rules.audit import finding_families
from rules.context import BadObject
from rules.messages import counted
from rules.model import Decision
from rules.outcomes import MUTATING_FAMILIES, mutation_outcomes, shown, validation_outcomes
from rules.quoting import clip, escaped
from rules.safeload import dump_json
from webhook import metrics
from webhook.app.body import BodyError, too_large
from webhook.app.codec import AdmissionRequest, ReviewError, build_response, decode_review
from webhook.logs import Throttle
from webhook.runtime import Runtime

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY = 4 * 1024 * 1024

Handler = Callable[[AdmissionRequest, Runtime], Decision]


def _mutate(req: AdmissionRequest, rt: Runtime) -> Decision:
    return pipeline.mutate(req.subject, rt.view, rt.policy, rt.namespace)


def _validate(req: AdmissionRequest, rt: Runtime) -> Decision:
    return pipeline.validate(req.subject, rt.view, rt.policy, rt.namespace)


def _allow(req: AdmissionRequest, rt: Runtime) -> Decision:
    """The benchmark's floor: parse the review, answer allowed."""
    return Decision()


@dataclass(frozen=True)
class Endpoint:
    """A review endpoint: served at `/<name>`; only a mutating one may answer with a patch."""

    name: str
    handler: Handler
    mutating: bool


ENDPOINTS: dict[str, Endpoint] = {
    endpoint.name: endpoint for endpoint in (Endpoint("mutate", _mutate, True), Endpoint("validate", _validate, False))
}


def create_app(
    runtime: Runtime, *, max_body: int = DEFAULT_MAX_BODY, trivial_endpoint: bool = False, log_reviews: bool = False
) -> Flask:
    """The WSGI app of one worker (Flask's app factory): the tests build it around any Runtime, the server around
    the one `webhook.serving.bootstrap` assembles from Settings. `log_reviews`: one info line per review answered.

    Reviews are answered by `ReviewEndpoints`, a WSGI layer in front of Flask (Flask's documented way to wrap
    `app.wsgi_app`): Flask's request and response objects and its contexts cost 110 µs of a review's 130 µs
    in-process, more than every rule. Flask serves everything else: health, readiness, metrics and the errors
    of other methods and paths.
    """
    app = Flask("storage-affinity-webhook")
    app.extensions["runtime"] = runtime
    endpoints = dict(ENDPOINTS)
    if trivial_endpoint:
        endpoints["allow"] = Endpoint("allow", _allow, False)

    for name in endpoints:
        # Registered so that Flask answers other methods with 405; a POST never reaches this view.
        app.add_url_rule(f"/{name}", name, _not_dispatched, methods=["POST"])
    app.wsgi_app = ReviewEndpoints(  # type: ignore[method-assign]
        app.wsgi_app, endpoints, runtime, max_body, log_reviews=log_reviews
    )

    @app.get("/livez")
    @app.get("/healthz")
    def livez() -> Response:
        """Liveness: the process answers. `/livez` is the name Kubernetes components use, `/healthz` the older one."""
        return Response("ok\n", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        states = runtime.readiness()
        ready = all(state.startswith("ok") for state in states.values())
        body = "".join(f"[{'+' if s.startswith('ok') else '-'}] {k}: {s}\n" for k, s in states.items())
        return Response(body + ("ready\n" if ready else "not ready\n"), 200 if ready else 503, mimetype="text/plain")

    @app.get("/metrics")
    def metrics_view() -> Response:
        body, content_type = metrics.render()
        return Response(body, content_type=content_type)

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Response:
        status, body, content_type = _error(exc.description or exc.name, exc.code or 500)
        headers = [(k, v) for k, v in exc.get_headers() if k.lower() == "allow"]  # a 405 names the methods
        return Response(body, status, headers=headers, content_type=content_type)

    return app


def _not_dispatched() -> Response:
    raise AssertionError("review POSTs are answered by ReviewEndpoints")


Answer = tuple[int, bytes, str]  # status, body, content type
_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"
_STATUS_LINES = {status.value: f"{status.value} {status.phrase}" for status in HTTPStatus}


class ReviewEndpoints:
    """WSGI middleware: a POST to a review endpoint is answered here, anything else goes to the wrapped app."""

    def __init__(
        self,
        app: Callable[..., Any],
        endpoints: dict[str, Endpoint],
        runtime: Runtime,
        max_body: int,
        *,
        log_reviews: bool = False,
    ) -> None:
        self.app = app
        self.endpoints = {f"/{endpoint.name}": endpoint for endpoint in endpoints.values()}
        self.runtime = runtime
        self.max_body = max_body
        self.log_reviews = log_reviews
        self._unreadable = Throttle()  # any client can send broken bodies, as fast as it likes

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        endpoint = self.endpoints.get(environ.get("PATH_INFO", ""))
        if endpoint is None or environ.get("REQUEST_METHOD") != "POST":
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        try:
            status, body, content_type = self.answer(endpoint, environ)
        except Exception:  # a bug here must still be answered, as Flask would: 500, and the traceback logged
            log.exception("review %s failed", endpoint.name)
            status, body, content_type = _error("internal error", 500)
        start_response(
            _STATUS_LINES[status],
            [("Content-Type", content_type), ("Content-Length", str(len(body)))],
        )
        return [body]

    def answer(self, endpoint: Endpoint, environ: dict[str, Any]) -> Answer:
        name = endpoint.name
        started = time.perf_counter()
        runtime = self.runtime
        if (unavailable := runtime.unavailable()) is not None:
            metrics.UNAVAILABLE.labels(name).inc()
            return self._refused(name, unavailable, 503)
        try:
            body = _read_body(environ, self.max_body)
        except BodyError as exc:  # raised by the server's transport (webhook/app/body.py): one line, no traceback
            if (count := self._unreadable.due(exc.kind)) is not None:
                log.warning(
                    "review %s: %s (%s like it; at most one line a minute)", name, exc.message, counted(count, "body")
                )
            metrics.BAD_REQUESTS.labels(name, str(exc.status)).inc()
            return self._refused(name, exc.message, exc.status)
        try:
            req = decode_review(body)
        except ReviewError as exc:
            metrics.BAD_REQUESTS.labels(name, str(exc.status)).inc()
            return self._refused(name, exc.message, exc.status)
        try:
            with runtime.review_scope():
                decision = endpoint.handler(req, runtime)
        except BadObject as exc:
            metrics.BAD_REQUESTS.labels(name, "400").inc()
            return self._refused(name, exc.text(f"request.{exc.source}"), 400)
        document = build_response(req, decision, mutating=endpoint.mutating)
        outcome = _outcome(document)
        for rule in decision.rule_errors:
            metrics.RULE_ERRORS.labels(name, rule).inc()
        if decision.failure:
            metrics.LOOKUP_FAILURES.labels(name, runtime.policy.on_lookup_failure).inc()
        metrics.REQUESTS.labels(name, req.subject.kind, req.subject.operation, outcome).inc()
        _count_decisions(decision, mutating=endpoint.mutating)
        elapsed = time.perf_counter() - started
        metrics.DURATION.labels(name).observe(elapsed)
        if self.log_reviews:
            log.info("%s", review_line(name, req, decision, document, elapsed))
        return 200, dump_json(document), _JSON

    def _refused(self, name: str, message: str, status: int) -> Answer:
        """A review answered with an error status: with `--log-reviews` it gets its line like any other."""
        if self.log_reviews:
            log.info("review %s: %d %s", name, status, escaped(message.rstrip()))
        return _error(message, status)


def review_line(
    endpoint: str, req: AdmissionRequest, decision: Decision, document: dict[str, Any], seconds: float
) -> str:
    """One review, for a developer watching `make run` (`--log-reviews`): what came in and what it got.

    `review mutate Pod shop/mover-1 CREATE: allowed, 3 patch ops, 1 warning, 0.8 ms`; a name the API server has
    not generated yet shows as the object's `generateName` and `*`. Names come from the body: clipped, escaped."""
    response = document["response"]
    subject = req.subject
    meta = (subject.obj or subject.old or {}).get("metadata")
    generate = meta.get("generateName") if isinstance(meta, dict) else None
    name = clip(subject.name) or (f"{clip(generate)}*" if isinstance(generate, str) and generate else "-")
    namespace = f"{clip(subject.namespace)}/" if subject.namespace else ""
    who = escaped(f"{clip(subject.kind)} {namespace}{name} {clip(subject.operation)}")
    ops = len(decision.patch) if "patch" in response else 0
    warnings = len(response.get("warnings") or ())
    verdict = "allowed" if response["allowed"] else "denied"
    return (
        f"review {endpoint} {who}: {verdict}, {counted(ops, 'patch op')}, {counted(warnings, 'warning')}, "
        f"{seconds * 1000:.1f} ms"
    )


def _read_body(environ: dict[str, Any], limit: int) -> bytes:
    """The body, or BodyError 413 when it is larger than `limit`, as the server's own reads raise it (with a
    timeout, bad framing or chunk sizes past the limit). An over-limit Content-Length is refused before reading;
    a chunked body (no Content-Length) is read one byte past the limit, so that a 10 MB body gets 413, not a
    truncated "not JSON"."""
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH")
    if length and int(length) > limit:  # the server has checked it is a number
        raise too_large(limit)
    data: bytes = stream.read(int(length)) if length else stream.read(limit + 1)
    if len(data) > limit:
        raise too_large(limit)
    return data


#: Every family a decision can be counted under: the label's values are this fixed set (rules/outcomes.py `shown`).
_DECISION_FAMILIES = frozenset({*MUTATING_FAMILIES, *finding_families()})


def _count_decisions(decision: Decision, *, mutating: bool) -> None:
    """What the review decided, per rule family (storage_affinity_admission_decisions_total)."""
    if mutating:
        if decision.role is None:
            return  # not a pod's mutation: no family had a say
        outcomes = mutation_outcomes(decision.role, decision)
    elif decision.findings:
        outcomes = validation_outcomes(decision)
    else:
        return
    for outcome in outcomes:
        metrics.DECISIONS.labels(*shown(outcome, _DECISION_FAMILIES)).inc()


def _outcome(document: dict[str, object]) -> str:
    response = document["response"]
    assert isinstance(response, dict)
    if not response["allowed"]:
        return "denied"
    return "patched" if "patch" in response else "allowed"


def _error(message: str, status: int) -> Answer:
    """A plain-text error; the paths and values it quotes come from the body, so control characters are escaped."""
    return status, (escaped(message.rstrip()) + "\n").encode(), _TEXT
