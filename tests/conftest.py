"""The fixture every in-process webhook test shares: `client`, built by `tests.support.app_client`.

A test module that needs another policy, view or scope overrides `client` with its own `app_client(...)` call.

In process, the review deadline is far off: whether a review at the budget's limits ends within 100 ms of CPU time
depends on the machine and what else runs on it, and a test's answer must not (speed is measured by `make bench`).
The deadline's own tests shorten it, or move its clock, themselves; the real server keeps the real one.

`make test` runs the tests on every core with pytest-xdist (`--dist loadfile`): each test file runs on one worker,
so a module's shared fixtures (a server, a Prometheus) start once. Not `--dist loadgroup`: pytest-xdist 3.8 marks a
group by rewriting `item._nodeid`, which pytest 9.2's `nodeid` no longer reads, so every test would be its own group.
The two modules that write into the work tree write different paths (`make run`'s `dev-certs/`, `make dist`'s
`build/` and egg-info), so they may run at once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient

from rules import deadline
from tests.support import SMALL_BODY, app_client

#: The in-process deadline: a review that passes it loops, whatever the machine.
IN_PROCESS_DEADLINE_S = 30.0


@pytest.fixture(autouse=True)
def _distant_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadline, "REVIEW_SECONDS", IN_PROCESS_DEADLINE_S)


@pytest.fixture(autouse=True)
def _no_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """No $COLUMNS or $LINES from whatever ran pytest: a pytest-xdist worker sets COLUMNS=80, and an audit table
    written off a terminal wraps to $COLUMNS. The tests of the terminal width set them themselves."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """The root logger as it was: a command run in process (`rotate-certs`) configures it with a handler on
    sys.stderr, which is then this test's captured stream; left there, every later line on the worker is written
    to a closed stream, and logging's complaint lands in whichever test's stderr comes next."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def client() -> FlaskClient:
    """The default policy over examples/cluster.yaml, with the benchmark's trivial `/allow` endpoint and a
    `SMALL_BODY` limit, so that a test can pass it cheaply."""
    return app_client(max_body=SMALL_BODY, trivial_endpoint=True)
