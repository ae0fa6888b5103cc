"""The fixture every in-process webhook test shares: `client`, built by `tests.support.app_client`.

A test module that needs another policy, view or scope overrides `client` with its own `app_client(...)` call.
"""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from tests.support import SMALL_BODY, app_client


@pytest.fixture
def client() -> FlaskClient:
    """The default policy over examples/cluster.yaml, with the benchmark's trivial `/allow` endpoint and a
    `SMALL_BODY` limit, so that a test can pass it cheaply."""
    return app_client(max_body=SMALL_BODY, trivial_endpoint=True)
