"""The `test` command run as an operator's CI runs it: passing, failing and malformed suites (tests/data/suites),
their exit codes and messages; and the example suites, whose every patch is checked against the schema."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pytest

from rules.kube.feasible import pod_of
from tests.support import DATA, EXAMPLES, ROOT, mutate_checked
from tests.webhook.commands import run_command
from webhook.cli.junit import junit_report
from webhook.cli.suitefile import find_suites, load_suite
from webhook.cli.suites import run_case

SUITES = DATA / "suites"
PASSING = SUITES / "passing" / "storage-affinity-test.yaml"
FAILING = SUITES / "failing" / "storage-affinity-test.yaml"
KEYS = SUITES / "malformed" / "keys" / "storage-affinity-test.yaml"
SYNTAX = SUITES / "malformed" / "syntax" / "storage-affinity-test.yaml"


#: The warning (and roleTrust violation) of tests/data/suites/failing/untrusted-backup.yaml.
UNTRUSTED = (
    "role backup (annotation storage-affinity.io/role: backup) is not trusted in namespace apps: none of its "
    "tolerations or placement applied (the policy's trust.namespaces or trust.requesters trusts it)"
)
ROLE_FIELD = "metadata.annotations[storage-affinity.io/role]"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_command("test", *args)


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_a_passing_suite_exits_0_with_a_line_per_case() -> None:
    result = run(shown(PASSING.parent))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 10 and all(line.endswith("  pass") for line in lines[:-1])
    assert lines[0] == (
        f"{shown(PASSING)}  untolerated NoSchedule and NoExecute taints and a cordon keep a plain pod off  pass"
    )
    assert lines[-1] == "1 suites, 9 cases: 9 passed, 0 failed"
    assert result.stderr == ""


def test_a_failing_suite_exits_1_naming_each_failed_expectation_with_what_came() -> None:
    result = run(shown(FAILING))
    assert result.returncode == 1, result.stderr
    suite = shown(FAILING)
    assert result.stdout.splitlines() == [
        # node-b is tainted dedicated=databases:NoSchedule and the pod does not tolerate it: not among its nodes
        f"{suite}  the tainted node is expected  fail",
        '    nodes: expected ["node-a", "node-b", "node-e"], got ["node-a", "node-e"]',
        f"{suite}  a denial is expected  fail",
        "    allowed: expected false, got true",
        f"{suite}  a toleration, a warning and a violation are expected  fail",
        '    tolerations: expected {"key": "dedicated"}, got []',
        '    warnings: expected "no such warning", got []',
        '    violations: expected {"family": "placement"}, got []',
        f"{suite}  a nodeName is expected  fail",
        '    patched spec.nodeName: expected "node-b", got no such field',
        f"{suite}  this one passes  pass",
        f"{suite}  no warning and no violation are expected, but there are some  fail",
        f"    warnings: expected [], got [{json.dumps(UNTRUSTED)}]",
        f'    violations: expected [], got [{{"family": "roleTrust", "field": "{ROLE_FIELD}", "message": '
        f"{json.dumps(UNTRUSTED)}}}]",
        f"{suite}  counts that do not hold  fail",
        f"    warningCount: expected 2, got [{json.dumps(UNTRUSTED)}]",
        f'    violationCount: expected 0, got [{{"family": "roleTrust", "field": "{ROLE_FIELD}", "message": '
        f"{json.dumps(UNTRUSTED)}}}]",
        f"{suite}  a placement decision is expected that did not happen  fail",
        '    decisions: expected "^load affinity: applied", got ["role: backup (annotation storage-affinity.io/role: '
        'backup)", "load affinity: not applied, role backup is not trusted in namespace apps"]',
        f"{suite}  absence, counts and decisions that hold  pass",
        "1 suites, 9 cases: 2 passed, 7 failed",
    ]


def test_case_selects_by_regex_and_json_is_for_tools() -> None:
    result = run(shown(FAILING), "--case", "^a (denial|nodeName)", "-o", "json")
    assert result.returncode == 1
    out = json.loads(result.stdout)
    assert [(c["case"], c["result"]) for c in out["cases"]] == [
        ("a denial is expected", "fail"),
        ("a nodeName is expected", "fail"),
    ]
    assert out["cases"][0]["failures"] == [{"expectation": "allowed", "expected": False, "got": True}]
    assert out["cases"][1]["failures"] == [{"expectation": "patched spec.nodeName", "expected": "node-b", "got": None}]
    assert out["summary"] == {"suites": 1, "cases": 2, "passed": 0, "failed": 2, "problems": 0}
    assert (
        run(shown(PASSING), "--case", "matchFields").stdout.splitlines()[-1] == "1 suites, 1 cases: 1 passed, 0 failed"
    )


def test_malformed_suites_exit_2_listing_every_problem_with_file_and_key_while_the_others_run() -> None:
    result = run(shown(SUITES))
    assert result.returncode == 2
    keys = shown(KEYS)
    assert result.stderr.splitlines() == [
        f"storage-affinity-webhook: {keys}: polcy: unknown key (a suite has: policy, cluster, cases)",
        f'storage-affinity-webhook: {keys}: cases[1].name: "twice" is also the name of cases[0]',
        f"storage-affinity-webhook: {keys}: cases[2].object: {shown(KEYS.parent)}/missing-pod.yaml: cannot read: "
        "No such file or directory",
        f"storage-affinity-webhook: {keys}: cases[3]: needs exactly one of `object` (a file) and `resource` (the "
        "object inline)",
        f"storage-affinity-webhook: {keys}: cases[4]: needs exactly one of `object` (a file) and `resource` (the "
        "object inline)",
        f'storage-affinity-webhook: {keys}: cases[5].resource: kind "Service" is not reviewed (review checks Pod, '
        "ConfigMap, Job, Deployment, StatefulSet, DaemonSet, ReplicaSet, CronJob)",
        f"storage-affinity-webhook: {keys}: cases[6].expect.nodez: unknown key (expectations: allowed, nodes, "
        "tolerations, warnings, violations, warningCount, violationCount, decisions, patched)",
        f"storage-affinity-webhook: {keys}: cases[6].expect.allowed: missing: every case says whether the object is "
        "allowed",
        f"storage-affinity-webhook: {keys}: cases[7].expect.nodes: the object runs no pod: only a Pod or a workload "
        "has nodes",
        f"storage-affinity-webhook: {keys}: cases[8].expect.warnings[0]: not a regular expression: missing ), "
        "unterminated subpattern at position 0",
        f"storage-affinity-webhook: {keys}: cases[9].expect.decisions[0]: not a regular expression: unterminated "
        "character set at position 0",
        f"storage-affinity-webhook: {keys}: cases[9].expect.warningCount: must be a whole number, 0 or more",
        f"storage-affinity-webhook: {keys}: cases[9].expect.violationCount: must be a whole number, 0 or more",
        f"storage-affinity-webhook: {shown(SYNTAX)}: YAML syntax error at line 3, column 1: did not find expected "
        "',' or ']'",
    ]
    lines = result.stdout.splitlines()
    assert sum(line.endswith("  pass") for line in lines) == 11  # the passing suite, and the failing suite's two
    assert sum(line.endswith("  fail") for line in lines) == 7
    assert lines[-1] == "4 suites, 18 cases: 11 passed, 7 failed, 14 suite problems"
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-dir"], "storage-affinity-webhook: no-such-dir: cannot read: No such file or directory"),
        (["docs"], "storage-affinity-webhook: docs: no storage-affinity-test.yaml under this directory"),
    ],
)
def test_a_path_without_suites_is_a_problem(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [message]


def test_policy_replaces_every_suites_own_and_the_changed_policy_fails_the_case_it_breaks() -> None:
    suite = EXAMPLES / "load-affinity"
    assert run(shown(suite)).returncode == 0
    changed = run(shown(suite), "--policy", shown(suite / "policy-xlarge-only.yaml"))
    assert changed.returncode == 1
    assert '    nodes: expected ["ip-10-0-2-42.ec2.internal"], got []' in changed.stdout.splitlines()


def test_the_example_suites_pass() -> None:
    result = run("examples")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith("2 suites, ")


def example_cases() -> list[object]:
    paths, problems = find_suites(["examples", str(SUITES / "passing")])
    assert problems == []
    return [
        pytest.param(path, case.name, id=f"{path.parent.name}:{case.name}")
        for path in paths
        for case in load_suite(path).cases
    ]


@pytest.mark.parametrize(("path", "name"), example_cases())
def test_each_passing_case_patches_a_valid_object_that_a_second_review_leaves_alone(path: Path, name: str) -> None:
    suite = load_suite(path)
    (case,) = [c for c in suite.cases if c.name == name]
    assert run_case(suite, case) == []
    obj = case.request.subject.obj
    assert obj is not None and suite.view is not None and suite.policy is not None
    if pod_of(case.request.subject.kind, obj) is not None:
        mutate_checked(obj, suite.view, suite.policy)


def test_the_suite_docs_cli_md_shows_runs_and_passes(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    block = page.split("## `test`: policy test suites", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    for name in ("cluster.yaml", "mover-pod.yaml", "bad-annotations-pod.yaml", "restore-pod.yaml"):
        (tmp_path / name).symlink_to(EXAMPLES / name)
    (tmp_path / "policy.yaml").symlink_to(ROOT / "rules" / "default_policy.yaml")
    (tmp_path / "storage-affinity-test.yaml").write_text(block)
    result = run(str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "1 suites, 3 cases: 3 passed, 0 failed"


def test_junit_output_is_a_report_ci_systems_read() -> None:
    """`-o junit`: one testsuite per file, one testcase per case, a failure per failed case holding each failed
    expectation, a suite that is bad as an error; the counts agree with the text summary."""
    result = run(shown(SUITES), "-o", "junit")
    assert result.returncode == 2  # the malformed suites
    root = ElementTree.fromstring(result.stdout)
    assert (root.tag, root.get("tests"), root.get("failures"), root.get("errors")) == ("testsuites", "32", "7", "14")
    failing = root.find(f"testsuite[@name='{shown(FAILING)}']")
    assert failing is not None and (failing.get("tests"), failing.get("failures")) == ("9", "7")
    case = failing.find("testcase[@name='counts that do not hold']")
    assert case is not None
    failure = case.find("failure")
    assert failure is not None and failure.get("message", "").startswith("warningCount: expected 2, got [")
    assert (failure.text or "").splitlines()[1].startswith("violationCount: expected 0, got [")
    assert failing.find("testcase[@name='this one passes']/failure") is None
    errors = [e.get("message") for e in root.iterfind("testsuite[@name='suite problems']/testcase/error")]
    assert errors[0] == f"{shown(KEYS)}: polcy: unknown key (a suite has: policy, cluster, cases)"


def test_junit_carries_what_xml_cannot_as_escapes() -> None:
    """A case name with control characters (a suite from a pull request) still gives a report that parses."""

    @dataclass
    class Result:
        suite: str
        case: str
        failure_lines: list[str]

    report = junit_report([Result("s.yaml", "bell\x07 and nul\x00", ["nodes: expected \x1b[31m"])], ["bad\x0b"])
    root = ElementTree.fromstring(report)
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("name") == "bell\\u0007 and nul\\u0000"
    assert root.find("testsuite/testcase/failure").get("message") == "nodes: expected \\u001b[31m"  # type: ignore[union-attr]
    assert root.find("testsuite[@name='suite problems']/testcase/error").get("message") == "bad\\u000b"  # type: ignore[union-attr]
