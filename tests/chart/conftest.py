"""Fixtures of the chart tests; the helpers are in tests/chart/chart_helpers.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.chart_helpers import SCENARIOS, Manifest, render


@pytest.fixture(params=sorted(SCENARIOS))
def scenario(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    return request.param, SCENARIOS[request.param]


@pytest.fixture
def rendered(scenario: tuple[str, dict[str, Any]]) -> list[Manifest]:
    return render(scenario[1])
