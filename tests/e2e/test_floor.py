"""The benchmark's bare server is the production gunicorn application with only the WSGI callable changed, and
the profile of a worker is grouped by the layer that pays for each sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.floor import group_samples
from testkit.server import running_server
from tests.e2e.test_server import mover_review

pytestmark = pytest.mark.e2e


def test_bare_server_answers_a_review_over_verified_tls_with_the_production_worker(tmp_path: Path) -> None:
    review = mover_review()
    with running_server(tmp_path, workers=1, program="bench.floor") as server, server.session() as session:
        answer = session.post(f"{server.url}/allow", json=review, timeout=10)
        assert answer.status_code == 200
        assert answer.json()["response"] == {"uid": review["request"]["uid"], "allowed": True}
        assert session.get(f"{server.url}/healthz", timeout=10).text == "ok\n"
    assert "webhook.serving.worker.DrainingGeventWorker" in server.log.read_text()


def test_samples_go_to_the_layer_that_pays_for_them() -> None:
    worker = (
        "DrainingGeventWorker.handle_request (webhook/serving/worker.py:196);"
        "AsyncWorker.handle_request (gunicorn/workers/base_async.py:329)"
    )
    flask = f"{worker};Flask.__call__ (flask/app.py:1536);view (webhook/app/endpoints.py:97)"
    raw = "\n".join(
        [
            f"{flask};labels (prometheus_client/metrics.py:181);LockType.acquire (gevent/thread.py:112) 3",
            f"{flask};decode_review (webhook/app/codec.py:74);JSONDecoder.raw_decode (json/decoder.py:353) 2",
            f"{flask};build_response (webhook/app/codec.py:143) 1",
            f"{flask};get_host (werkzeug/wsgi.py:120) 1",
            f"{worker};http_date (gunicorn/util.py:513);formatdate (email/utils.py:147) 1",
            f"{worker};sendall (gevent/_socketcommon.py:692);SSLSocket.send (gevent/ssl.py:561) 1",
            f"{worker};sleep (gevent/hub.py:166) 1",
        ]
    )
    grouped = group_samples(raw)
    assert grouped["samples"] == 10
    assert grouped["layers"] == {
        "prometheus metrics": 0.3,
        "JSON": 0.2,
        "our code": 0.1,
        "Flask/werkzeug": 0.1,
        "gunicorn HTTP": 0.1,
        "TLS": 0.1,
        "gevent hub": 0.1,
    }
