"""The fixture every in-process webhook test shares: `client`, built by `tests.support.app_client`.

A test module that needs another policy, view or scope overrides `client` with its own `app_client(...)` call.

In process, the review deadline is far off: whether a review at the budget's limits ends within 100 ms of CPU time
depends on the machine and what else runs on it, and a test's answer must not (speed is measured by `make bench`).
The deadline's own tests shorten it, or move its clock, themselves; the real server keeps the real one.

`make test` runs the tests on every core with pytest-xdist (`--dist loadgroup`): a test goes to whichever worker is
free, unless its `xdist_group` mark ties it to others. `pytest_collection_modifyitems` below gives that mark to every
test of a module that uses a module- or class-scoped fixture (a server, a Prometheus: started once, on one worker)
and to the modules that write into the work tree (WORK_TREE).
"""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from rules import deadline
from tests.support import SMALL_BODY, app_client

#: Modules whose tests write into the work tree, not a tmp_path (`make run` issues dev-certs/, `make dist` writes
#: build/ and the egg-info): they run one at a time, on one worker.
WORK_TREE = frozenset({"tests/docs/test_commands.py", "tests/test_install.py"})

#: The scopes of a fixture that a whole module (or class) shares.
SHARED_SCOPES = frozenset({"module", "class", "package"})


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.nodeid.partition("::")[0]
        if module in WORK_TREE:
            item.add_marker(pytest.mark.xdist_group("work-tree"))
        elif _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(module))


def _shares_a_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)  # a pytest.Function's; other items have none
    if info is None:
        return False
    return any(defs[-1].scope in SHARED_SCOPES for defs in info.name2fixturedefs.values() if defs)


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


@pytest.fixture
def client() -> FlaskClient:
    """The default policy over examples/cluster.yaml, with the benchmark's trivial `/allow` endpoint and a
    `SMALL_BODY` limit, so that a test can pass it cheaply."""
    return app_client(max_body=SMALL_BODY, trivial_endpoint=True)
