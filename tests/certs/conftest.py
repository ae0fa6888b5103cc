"""Fixtures shared by the certs tests: one CA and serving certificate per session (issuing is cheap but not free)."""

from __future__ import annotations

from pathlib import Path

import pytest

from certs.issue import CertKeyPair, issue_ca, issue_serving
from tests.certs.support import NAMESPACE, SERVICE


@pytest.fixture(scope="session")
def ca() -> CertKeyPair:
    return issue_ca()


@pytest.fixture(scope="session")
def leaf(ca: CertKeyPair) -> CertKeyPair:
    return issue_serving(ca, SERVICE, NAMESPACE)


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return tmp_path / "tls"
