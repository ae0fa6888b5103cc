"""Nothing the webhook keeps across requests grows with the number of distinct requests: every memo has a bound,
and no metric takes an unbounded label value from a request. (The RSS of a worker under 100,000 distinct reviews
is measured by `python -m bench.distinct`.)"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil

from flask.testing import FlaskClient

import rules
import webhook
from bench.distinct import reviews
from rules.kube import names
from webhook import metrics

DISTINCT = 3_000


def _request_series() -> int:
    return metrics.render()[0].count(b"\nstorage_affinity_admission_requests_total{")


def test_distinct_kinds_and_operations_do_not_add_metric_series(client: FlaskClient) -> None:
    for i, body in enumerate(reviews(DISTINCT, seed=7)):
        answer = client.post("/mutate" if i % 2 else "/validate", data=body, content_type="application/json")
        assert answer.status_code == 200
    endpoints, outcomes = 3, 4  # mutate, validate, allow; allowed, patched, denied, error
    bound = endpoints * (len(metrics.KINDS) + 1) * (len(metrics.OPERATIONS) + 1) * outcomes
    assert _request_series() <= bound
    assert b'kind="other",operation="other"' in metrics.render()[0]


def test_label_memos_hold_at_most_their_bound(client: FlaskClient) -> None:
    labels = {f"k{i}.example.com/key": f"value-{i}" for i in range(2 * 4096)}
    for key, value in labels.items():
        assert names.label_key_error(key) is None
        assert names.label_value_error(value) is None
    for memo in (names._cached_label_key_error, names._cached_label_value_error):
        info = memo.cache_info()
        assert info.maxsize is not None and info.currsize <= info.maxsize


def _memos() -> list[tuple[str, functools._lru_cache_wrapper[object]]]:
    found = []
    for package in (rules, webhook):
        for module_info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if module_info.name.endswith(".__main__"):  # runs the CLI when imported
                continue
            module = importlib.import_module(module_info.name)
            for name, value in vars(module).items():
                # type(), not isinstance: flask's `request` proxy raises on any attribute outside a request
                if type(value) is functools._lru_cache_wrapper and value.__module__ == module.__name__:
                    found.append((f"{module.__name__}.{name}", value))
    return found


def test_every_memo_that_takes_arguments_is_bounded() -> None:
    """A memo without arguments holds one value; one with arguments holds one per distinct argument."""
    memos = _memos()
    assert "rules.kube.names._cached_label_key_error" in dict(memos)
    unbounded = [
        name
        for name, memo in memos
        if memo.cache_info().maxsize is None and inspect.signature(memo.__wrapped__).parameters
    ]
    assert unbounded == []
