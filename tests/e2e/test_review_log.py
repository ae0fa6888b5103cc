"""`serve --log-reviews` (what `make run` passes) logs one line per review through the server's logging; without
it, as in the chart, reviews leave no line."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from testkit.reviews import admission_review
from testkit.server import running_server
from tests.support import EXAMPLES, ROOT, load_yaml

pytestmark = pytest.mark.e2e

LINE = re.compile(
    r"\[INFO\] webhook\.app\.endpoints: review mutate Pod shop/volsync-rsync-tls-src-db CREATE: allowed, 3 patch ops, "
    r"0 warnings, \d+\.\d ms$",
    re.M,
)


@pytest.mark.parametrize("log_reviews", [True, False], ids=["--log-reviews", "default"])
def test_one_line_per_review_only_when_asked(tmp_path: Path, log_reviews: bool) -> None:
    flags = ("--log-reviews",) if log_reviews else ()
    with running_server(tmp_path, "--cluster", str(EXAMPLES / "cluster.yaml"), *flags, workers=1) as server:
        review = admission_review("CREATE", load_yaml(EXAMPLES / "mover-pod.yaml"), uid="log-1")
        for _ in range(2):
            answer = server.session().post(server.url + "/mutate", json=review, timeout=10)
            assert answer.status_code == 200 and answer.json()["response"]["allowed"] is True
        deadline = time.monotonic() + 5
        while log_reviews and len(LINE.findall(server.log.read_text())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        text = server.log.read_text()
    assert len(LINE.findall(text)) == (2 if log_reviews else 0), text[-2000:]
    assert ("review mutate" in text) is log_reviews


def test_make_run_asks_for_review_lines() -> None:
    (run,) = re.findall(r"^run:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert "serve" in run and "--log-reviews" in run
