"""The structural fuzz, smaller, against the real server: gunicorn, gevent workers, TLS, the CLI's wiring.

What the in-process run cannot see is here: the WSGI server's own handling of odd bodies, and a worker's log.
Every answer must pass the same verdict, and the server's log must gain no line at ERROR and no traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml
from hypothesis import given, settings

from testkit.server import Server, running_server
from tests.fuzz import mutations as m
from tests.fuzz.profiles import examples
from tests.fuzz.test_structural_fuzz import Case, cases
from tests.fuzz.verdict import FuzzFailure, judge
from tests.support import EXAMPLES
from webhook.app.endpoints import DEFAULT_MAX_BODY

pytestmark = pytest.mark.e2e


class LiveWebhook:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.session: requests.Session = server.session()
        self.log_seen = server.log.stat().st_size

    def new_log_errors(self) -> str | None:
        with self.server.log.open("rb") as log:
            log.seek(self.log_seen)
            new = log.read().decode("utf-8", "replace")
        self.log_seen += len(new.encode("utf-8", "replace"))
        bad = [line for line in new.splitlines() if "[ERROR]" in line or "Traceback" in line]
        return bad[0][:300] if bad else None

    def check(self, case: Case) -> None:
        body = case.body()
        for endpoint in ("mutate", "validate"):
            answer = self.session.post(
                f"{self.server.url}/{endpoint}",
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=30,
            )
            failure: FuzzFailure | None = None
            try:
                content_type = answer.headers.get("Content-Type", "")
                judge(body, endpoint, answer.status_code, content_type, answer.content, max_body=DEFAULT_MAX_BODY)
            except FuzzFailure as exc:
                failure = exc
            logged = self.new_log_errors()
            if failure is not None or logged is not None:
                kind = failure.kind if failure is not None else "logged at ERROR"
                raise FuzzFailure(kind, f"/{endpoint} over TLS ({case.seed}): {failure or ''} {logged or ''}")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveWebhook]:
    m.built_pool()  # drawn here: hypothesis cannot draw it inside a test that is itself under @given
    tmp = tmp_path_factory.mktemp("structural-fuzz")
    policy = Path(tmp / "policy.yaml")
    policy.write_text(yaml.safe_dump(m.fuzz_policy_document()))
    args = ("--cluster", str(EXAMPLES / "cluster.yaml"), "--policy", str(policy))
    with running_server(tmp, *args, workers=1) as server:
        hook = LiveWebhook(server)
        try:
            yield hook
        finally:
            hook.session.close()


@settings(max_examples=examples(300))
@given(case=cases(m.seeds()))
def test_mutated_reviews_get_a_sound_answer_over_tls(live: LiveWebhook, case: Case) -> None:
    live.check(case)
