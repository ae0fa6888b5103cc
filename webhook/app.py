"""Flask app factory: the admission endpoints, health, readiness and metrics.

Errors are mapped to HTTP answers in one place (`_error`): a body that is not an AdmissionReview gets 400 with a
plain-text reason, an oversized one 413; a review always gets HTTP 200 with an AdmissionReview, even when a rule
fails (the pipeline turns that into the policy's `onLookupFailure`), except while no valid policy is in effect:
then 503 with the reason, and kube-apiserver applies the webhook's failurePolicy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from rules import pipeline
from rules.context import BadObject
from rules.model import Decision
from rules.quoting import escaped
from rules.safeload import dump_json
from webhook import metrics
from webhook.codec import AdmissionRequest, ReviewError, build_response, decode_review
from webhook.runtime import Runtime

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY = 4 * 1024 * 1024

Handler = Callable[[AdmissionRequest, Runtime], Decision]


def _mutate(req: AdmissionRequest, rt: Runtime) -> Decision:
    return pipeline.mutate(req.subject(), rt.view, rt.policy, rt.namespace)


def _validate(req: AdmissionRequest, rt: Runtime) -> Decision:
    return pipeline.validate(req.subject(), rt.view, rt.policy, rt.namespace)


def _allow(req: AdmissionRequest, rt: Runtime) -> Decision:
    """The benchmark's floor: parse the review, answer allowed."""
    return Decision()


ENDPOINTS: dict[str, tuple[Handler, bool]] = {
    "mutate": (_mutate, True),
    "validate": (_validate, False),
}


def create_app(runtime: Runtime, *, max_body: int = DEFAULT_MAX_BODY, trivial_endpoint: bool = False) -> Flask:
    """The WSGI app of one worker (Flask's app factory): the tests build it around any Runtime, the server around
    the one `webhook.bootstrap` assembles from Settings."""
    app = Flask("storage-affinity-webhook")
    app.config["MAX_CONTENT_LENGTH"] = max_body
    app.extensions["runtime"] = runtime
    endpoints = dict(ENDPOINTS)
    if trivial_endpoint:
        endpoints["allow"] = (_allow, False)

    for name, (handler, mutating) in endpoints.items():
        app.add_url_rule(f"/{name}", name, _review_view(name, handler, mutating, runtime), methods=["POST"])

    @app.get("/healthz")
    def healthz() -> Response:
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
        return _error(exc.description or exc.name, exc.code or 500)

    return app


def _review_view(name: str, handler: Handler, mutating: bool, runtime: Runtime) -> Callable[[], Response]:
    def view() -> Response:
        started = time.perf_counter()
        if (unavailable := runtime.unavailable()) is not None:
            metrics.UNAVAILABLE.labels(name).inc()
            return _error(unavailable, 503)
        try:
            body = _read_body()
            req = decode_review(body)
        except RequestEntityTooLarge:
            metrics.BAD_REQUESTS.labels(name, "413").inc()
            limit = request.max_content_length
            return _error(f"request body is larger than the limit of {limit} bytes", 413)
        except ReviewError as exc:
            metrics.BAD_REQUESTS.labels(name, str(exc.status)).inc()
            return _error(exc.message, exc.status)
        try:
            decision = handler(req, runtime)
        except BadObject as exc:
            metrics.BAD_REQUESTS.labels(name, "400").inc()
            return _error(exc.text(f"request.{exc.source}"), 400)
        document = build_response(req, decision, mutating=mutating)
        outcome = _outcome(document)
        for rule in decision.rule_errors:
            metrics.RULE_ERRORS.labels(name, rule).inc()
        if decision.failure:
            metrics.LOOKUP_FAILURES.labels(name, runtime.policy.on_lookup_failure).inc()
        metrics.REQUESTS.labels(name, req.kind, req.operation, outcome).inc()
        metrics.DURATION.labels(name).observe(time.perf_counter() - started)
        return Response(dump_json(document), mimetype="application/json")

    view.__name__ = f"review_{name}"
    return view


def _read_body() -> bytes:
    """The body, or RequestEntityTooLarge. An over-limit Content-Length is refused before reading; a chunked body
    (no Content-Length) is read one byte past the limit, because werkzeug would cut it there silently and a
    10 MB body would get "not JSON" instead of 413."""
    if request.content_length is not None:
        return request.get_data(cache=False)
    limit = request.max_content_length
    stream = request.environ["wsgi.input"]
    data: bytes = stream.read() if limit is None else stream.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise RequestEntityTooLarge()
    return data


def _outcome(document: dict[str, object]) -> str:
    response = document["response"]
    assert isinstance(response, dict)
    if not response["allowed"]:
        return "denied"
    return "patched" if "patch" in response else "allowed"


def _error(message: str, status: int) -> Response:
    """A plain-text error; the paths and values it quotes come from the body, so control characters are escaped."""
    return Response(escaped(message.rstrip()) + "\n", status, mimetype="text/plain")
