"""hey's summary as the benchmark and the load tests read it: errors and percentiles counted, never silently zero."""

from __future__ import annotations

import math

from testkit.hey import parse_summary

SUMMARY = """
Summary:
  Total:	3.0050 secs
  Requests/sec:	1520.3311

Latency distribution:
  10% in 0.0041 secs
  50% in 0.0083 secs
  99% in 0.0312 secs

Status code distribution:
  [200]	4560 responses
  [503]	2 responses

Error distribution:
  [3]	Post "https://localhost:8443/mutate": context deadline exceeded (Client.Timeout exceeded while awaiting headers)
  [1]	Post "https://localhost:8443/mutate": read: connection reset by peer
"""

FEW = """
Summary:
  Requests/sec:	181.9377

Latency distribution:
  50% in 0.0022 secs
  95% in 0.0125 secs
  0% in 0.0000 secs

Status code distribution:
  [200]	96 responses
"""


def test_errors_count_transport_failures_and_non_200_answers() -> None:
    run = parse_summary(SUMMARY)
    assert run.sent == 4560 + 2 + 4
    assert run.failed == 2 + 4
    assert run.timeouts == 3
    assert (run.rps, run.p50_ms, run.p99_ms) == (1520.3311, 8.3, 31.2)


def test_a_missing_percentile_is_nan_not_zero() -> None:
    run = parse_summary(FEW)
    assert run.failed == 0 and run.p50_ms == 2.2
    assert math.isnan(run.p99_ms)


def test_hey_summary_is_read_with_its_failures() -> None:
    text = (
        "Summary:\n  Total:\t4.0 secs\n\nStatus code distribution:\n  [200]\t1234 responses\n  [503]\t2 responses\n\n"
        'Error distribution:\n  [3]\tPost "https://localhost:1/mutate": EOF\n'
    )
    result = parse_summary(text)
    assert result.statuses == {200: 1234, 503: 2}
    assert result.errors == {'Post "https://localhost:1/mutate": EOF': 3}
    assert (result.sent, result.failed) == (1239, 5)
