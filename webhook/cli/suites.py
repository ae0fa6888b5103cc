"""The `test` command: run policy test suites (`storage-affinity-test.yaml`) as an operator's CI does.

Each case goes through `review`'s pipeline (mutate, apply the patch, validate the result) against its suite's
policy and cluster manifests; the result, and the Nodes it may run on (rules/kube/feasible.py), are compared with
what the case expects (expect.py). Output: one line per case, failed expectations under it, then a summary.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rules.model import Json
from webhook.cli.args import EXIT_BAD_INPUT, subcommand
from webhook.cli.expect import MISSING, Failure, Outcome, failures

if TYPE_CHECKING:
    from webhook.cli.suitefile import Case, Suite

EXIT_PASSED, EXIT_FAILED = 0, 1
SUITE_FILE = "storage-affinity-test.yaml"


def add_parser(sub: Any) -> None:
    test = subcommand(
        sub,
        "test",
        f"run policy test suites ({SUITE_FILE}): where each object lands and what admission says",
        f"Run every case of the suites named, or of every {SUITE_FILE} under the directories named:\n"
        "review its object (mutate, apply the patch, validate) against the suite's policy and cluster,\n"
        "and compare the result, and the Nodes it may run on, with what the case expects.",
        "0  every case passed",
        "1  a case failed (each failed expectation printed with what was expected and what came)",
        bad="bad input or usage: a suite that is bad, each problem named with its file and key (the others run)",
    )
    test.add_argument(
        "paths", nargs="+", metavar="PATH", help=f"a suite file, or a directory searched for {SUITE_FILE}"
    )
    test.add_argument("--case", type=_pattern, metavar="REGEX", help="run only the cases whose name this matches")
    test.add_argument(
        "--policy",
        type=Path,
        help="run every suite against this policy (ConfigMap or bare document) instead of its own: try a change "
        "before it rolls out",
    )
    test.add_argument(
        "--root",
        type=Path,
        metavar="DIR",
        help="the directory every file a suite names must lead to, symlinks followed (default: the working "
        "directory, as CI's checkout)",
    )
    test.add_argument(
        "-o",
        "--output",
        choices=["text", "json", "junit"],
        default="text",
        help="text: a line per case; json: for tools; junit: JUnit XML for CI systems' test reports",
    )


def _pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a regular expression: {exc}") from None


@dataclass
class CaseResult:
    suite: str
    case: str
    failures: list[Failure] = field(default_factory=list)

    def as_json(self) -> Json:
        return {
            "suite": self.suite,
            "case": self.case,
            "result": "fail" if self.failures else "pass",
            "failures": [f.as_json() for f in self.failures],
        }

    @property
    def failure_lines(self) -> list[str]:
        return [_shown(f) for f in self.failures]


def run(args: argparse.Namespace) -> int:
    # The pipeline is imported here, not with the parser: `serve` parses the same command line in its master.
    from rules.context import BadObject
    from webhook.app.codec import ReviewError
    from webhook.cli.suitefile import find_suites, load_suite

    paths, problems = find_suites(args.paths)
    results: list[CaseResult] = []
    for path in paths:
        suite = load_suite(path, args.policy, root=args.root)
        for case in suite.cases:
            if args.case is None or args.case.search(case.name):
                try:
                    results.append(CaseResult(str(path), case.name, run_case(suite, case)))
                except (ReviewError, BadObject) as exc:
                    suite.problem(f"cases[{case.name}]", str(exc))
        problems += suite.problems
    summary = {
        "suites": len(paths),
        "cases": len(results),
        "passed": sum(1 for r in results if not r.failures),
        "failed": sum(1 for r in results if r.failures),
        "problems": len(problems),
    }
    if args.output == "json":
        out = {"cases": [r.as_json() for r in results], "problems": problems, "summary": summary}
        print(json.dumps(out, indent=2))
    elif args.output == "junit":
        from webhook.cli.junit import junit_report

        print(junit_report(results, problems))
    else:
        print("\n".join([*(line for r in results for line in _lines(r)), _summary_line(summary)]))
    for problem in problems:
        print(f"storage-affinity-webhook: {problem}", file=sys.stderr)
    if problems:
        return EXIT_BAD_INPUT
    return EXIT_FAILED if summary["failed"] else EXIT_PASSED


def run_case(suite: Suite, case: Case) -> list[Failure]:
    """Review the case's object as `review` does, and what it expects that did not come."""
    from rules.kube.disclosed import EVERY_LABEL
    from rules.kube.feasible import Filters, feasibility, pod_of
    from rules.kube.volumes import claim_volumes, node_local_terms
    from rules.loadaffinity.movertolerations import data_mover_tolerations
    from webhook.cli.review import review

    assert suite.policy is not None and suite.view is not None  # a suite with cases loaded both
    subject = case.request.subject
    result = review(case.request, suite.policy, suite.view)
    pod = pod_of(subject.kind, result.object or {})
    nodes = None
    tolerations: list[Json] = []
    if pod is not None and "nodes" in case.expect:
        velero = data_mover_tolerations(
            suite.view, suite.policy, subject.namespace, pod[0], subject.user, kind=subject.kind
        )
        # The scheduler's view: every filter the pod, its claims and the Nodes decide, Velero's tolerations its own.
        scheduler = Filters(taints=True, cordon=True, volumes=True, labels=EVERY_LABEL, tolerations=velero)
        local = node_local_terms(claim_volumes(suite.view, subject.namespace, *pod))
        nodes = sorted(feasibility(suite.view, pod[1], scheduler, volume_terms=local).names())
    if pod is not None:
        tolerations = list(pod[1].get("tolerations") or [])
    outcome = Outcome(
        result.allowed, nodes, tolerations, result.warnings, result.violations, result.object, result.decisions
    )
    return failures(case.expect, outcome)


def _lines(result: CaseResult) -> list[str]:
    head = f"{result.suite}  {result.case}  {'fail' if result.failures else 'pass'}"
    return [head, *(f"    {line}" for line in result.failure_lines)]


def _shown(failure: Failure) -> str:
    def compact(value: Any) -> str:
        return json.dumps(value, separators=(", ", ": "), ensure_ascii=False)

    got = repr(failure.got) if failure.got is MISSING else compact(failure.got)
    return f"{failure.expectation}: expected {compact(failure.expected)}, got {got}"


def _summary_line(summary: dict[str, int]) -> str:
    line = (
        f"{summary['suites']} suites, {summary['cases']} cases: {summary['passed']} passed, {summary['failed']} failed"
    )
    return f"{line}, {summary['problems']} suite problems" if summary["problems"] else line
