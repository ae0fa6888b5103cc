"""Fixtures of the chart tests; the helpers are in chart_helpers.py (a unique name, importable from any test dir)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chart_helpers import SCENARIOS, Manifest, render


@pytest.fixture(params=sorted(SCENARIOS))
def scenario(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    return request.param, SCENARIOS[request.param]


@pytest.fixture
def rendered(scenario: tuple[str, dict[str, Any]]) -> list[Manifest]:
    return render(scenario[1])
