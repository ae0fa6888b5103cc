"""What the tests and the benchmarks both need to exercise the real thing: a fake Kubernetes API server, the real
server started as `serve` starts it, the hey load generator, and AdmissionReviews as kube-apiserver sends them.

Nothing here is shipped (the wheel holds rules, webhook and certs), and nothing outside tests/ imports tests/.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
