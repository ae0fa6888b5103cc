"""No raw control or bidi character reaches a person from what the audit, the reports, the review and the log
print, and one escaped text (rules/quoting.py `escaped`) reaches them all: the messages are escaped when a rule
makes them, not by each output.

A tenant's text goes into every place tests/data/audit/hostile.yaml marks HOSTILE (names, namespaces, labels,
annotations and their keys, node names, claims, container names, scheduler and kubelet messages), then through
`audit -o table` (one finding a line, wrapped to a width, and as blocks), `-o wide`, `-o json` and `-o yaml` over
`--cluster` files (in process and through the CLI), the policy reports built from that audit, `review`, the
admission answer, and the `--log-reviews` line and the server's log format.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules import pipeline
from rules.context import BadObject
from rules.model import Decision, Json
from rules.policy import Policy
from rules.quoting import escaped
from rules.reports import OPENREPORTS, build_reports
from testkit import yamldocs
from tests.support import DATA, EXAMPLES, load_yaml
from webhook.app.codec import build_response
from webhook.app.endpoints import review_line
from webhook.audit.command import AuditRun, objects_from_files, run_audit
from webhook.audit.output import render
from webhook.cli.review import as_request, review
from webhook.logs import DATE_FORMAT, LOG_FORMAT, EscapingFormatter
from webhook.policy.file import load_policy_file
from webhook.state.static import state_of

TOKEN = "HOSTILE"
FIXTURE = load_yaml(DATA / "audit" / "hostile.yaml")
POLICY_FILE = EXAMPLES / "policy-velero-source.yaml"
POLICY, _ = load_policy_file(POLICY_FILE)
NOW = datetime(2026, 11, 27, tzinfo=UTC)
#: What a terminal acts on or reorders: C0, DEL, C1, an OSC title, CSI sequences (7- and 8-bit), the bidi marks,
#: embeddings, overrides and isolates, the line and paragraph separators.
SEQUENCES = (
    "\x1b]0;pwned\x07",
    "\x1b[2J\x1b[H",
    "\x1b[31m",
    "\x9b2J",
    "\x1bP+q\x1b\\",
    "\r\n",
    "\x00",
    "\x7f",
    "\x85",
    "\x9f",
    "\u061c",
    "\u200e",
    "\u200f",
    *(chr(c) for c in range(0x202A, 0x202F)),
    *(chr(c) for c in range(0x2066, 0x206A)),
    "\u2028",
    "\u2029",
    "\ufeff",
)
SURROGATES = ("\ud800", "\udfff", "\udc80")


def hostile_text(*, surrogates: bool) -> st.SearchStrategy[str]:
    """Short text mixing terminal sequences, any character and, where the path carries them, lone surrogates
    (no UTF-8 file can hold one: `--cluster` files refuse `"\\ud800"` with a DocumentError)."""
    pieces = [st.sampled_from(SEQUENCES), st.characters(), st.sampled_from("ab-.")]
    if surrogates:
        pieces.append(st.sampled_from(SURROGATES))
    return st.lists(st.one_of(*pieces), min_size=1, max_size=6).map("".join)


def hostile_objects(text: str) -> list[Json]:
    """examples/cluster.yaml and the fixture with `text` in place of HOSTILE; inside a string that holds JSON
    (an annotation, a ConfigMap's data) `text` goes in JSON-escaped, so that the JSON still parses to it."""

    in_json = json.dumps(text, ensure_ascii=False)[1:-1]

    def put(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(TOKEN, in_json if value.startswith(("{", "[")) else text)
        if isinstance(value, list):
            return [put(item) for item in value]
        if isinstance(value, dict):
            return {put(k): put(v) for k, v in value.items()}
        return value

    return [*load_yaml(EXAMPLES / "cluster.yaml")["items"], *(put(o) for o in FIXTURE["items"])]


def strings(value: Any, skip: str = "wouldChange") -> Iterator[str]:
    """Every key and string in a decoded document but under `skip` (a JSON Patch: data a tool applies, which
    the JSON and YAML writers escape as they write it)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings(item, skip)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            if key != skip:
                yield from strings(item, skip)


def assert_printable(text: str, where: str) -> None:
    """Every line of `text` printable: no control, format (bidi) or separator character but the space."""
    for line in text.split("\n"):
        assert line.isprintable(), f"{where}: {line!r}"


def audit_run(objects: list[Json], policy: Policy) -> AuditRun:
    return run_audit(objects, state_of([("hostile.yaml", o) for o in objects]), policy, None, NOW)


def check_run(run: AuditRun, objects: list[Json], policy: Policy) -> None:
    """Every output of `run` printable, and the same escaped text in each: the table, wide, JSON, YAML, the
    reports, `review` and the admission answer of each audited pod, and its review log line."""
    assert run.findings >= 15, render(run, "wide")  # the fixture reaches the producers it names
    as_json = json.loads(render(run, "json"))
    as_yaml = yamldocs.load(render(run, "yaml"))
    assert as_yaml == as_json
    for text in strings(as_json):
        assert text.isprintable(), f"json: {text!r}"
    wide = render(run, "wide")
    for output in ("table", "json", "yaml"):
        assert_printable(render(run, output), f"-o {output}")
    assert_printable(wide, "-o wide")
    for width in (200, 80, 30):  # wrapped columns, then a block a finding
        assert_printable(render(run, "table", width), f"-o table at {width} columns")
    shown: dict[tuple[str, str, str], Json] = {(o["kind"], o["namespace"], o["name"]): o for o in as_json["objects"]}
    for report in run.reports:
        for finding in report.findings:
            assert finding.message in wide and finding.field in wide
        if report.cause is not None:
            assert report.cause.remedy in wide
    reports = build_reports(run.reports, OPENREPORTS, now=0)
    for text in strings(list(reports.values())):
        assert text.isprintable(), f"report: {text!r}"
    results = [r for report in reports.values() for r in report["results"]]
    by_subject = {
        (r["resources"][0]["kind"], r["resources"][0]["namespace"], r["resources"][0]["name"], r["message"])
        for r in results
    }
    for (kind, namespace, name), obj in shown.items():
        for finding in obj["findings"]:
            assert (kind, namespace, name, finding["message"]) in by_subject
    for obj in objects:
        if obj.get("kind") not in ("Pod", "Job") or not isinstance(obj.get("metadata"), dict):
            continue
        meta = obj["metadata"]
        _check_review(obj, shown.get((obj["kind"], escaped(meta["namespace"]), escaped(meta["name"]))), objects, policy)


def _check_review(obj: Json, audited: Json | None, objects: list[Json], policy: Policy) -> None:
    """`review` of the object says its denials as the audit does, and the admission answer and the review log
    line are printable and name the object as the audit does."""
    request = as_request(obj)
    view = state_of([("hostile.yaml", o) for o in objects])
    try:
        result = review(request, policy, view)
    except BadObject as exc:  # the audit reports the same problems as findings of family `object`
        assert audited is not None
        assert exc.problems == [(f["field"], f["message"]) for f in audited["findings"]]
        assert_printable(str(exc), "review")
        return
    violations = [(v["field"], v["message"]) for v in result.violations]
    if audited is not None:
        denials = [(f["field"], f["message"]) for f in audited["findings"] if f["severity"] == "deny"]
        assert violations == denials
    for text in [*result.warnings, result.status_message, *strings(result.as_json(), skip="object")]:
        assert text.isprintable(), f"review: {text!r}"
    decision = pipeline.validate(request.subject, view, policy)
    document = build_response(request, decision, mutating=False)
    for text in strings(document):
        assert text.isprintable(), f"admission: {text!r}"
    line = review_line("validate", request, decision, document, 0.001)
    assert_printable(line, "review log line")
    meta = obj["metadata"]
    assert f" {obj['kind']} {escaped(meta['namespace'])}/{escaped(meta['name'])} CREATE: " in line


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=hostile_text(surrogates=False))
def test_audit_of_cluster_files_is_escaped_alike_in_every_output(text: str, tmp_path_factory: Any) -> None:
    """Over `--cluster` files, as the CLI reads them: the text goes through YAML (escaped by the writer, read
    back raw) into every output."""
    objects = hostile_objects(text)
    path = tmp_path_factory.mktemp("hostile") / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}, allow_unicode=True))
    read, state = objects_from_files([path])
    check_run(run_audit(read, state, POLICY, None, NOW), read, POLICY)


@settings(max_examples=40, deadline=None)
@given(text=hostile_text(surrogates=True))
def test_audit_of_objects_in_memory_escapes_lone_surrogates_too(text: str) -> None:
    """The server's audit reads objects from its own state, where a lone surrogate can stand."""
    objects = hostile_objects(text)
    check_run(audit_run(objects, POLICY), objects, POLICY)


def test_one_escaped_form_everywhere() -> None:
    """The escape is quoting.escaped's, character for character: a pod name holding an OSC title sequence and a
    right-to-left override is shown as `\\x1b]0;pwned\\x07` and `\\u202e` in the table, JSON, YAML and reports."""
    objects = hostile_objects("\x1b]0;pwned\x07\u202e")
    run = audit_run(objects, POLICY)
    families = {f.family for r in run.reports for f in r.findings}
    assert families >= {"annotations", "diskAnnotations", "loadAffinity", "policy", "placement", "coScheduling"}
    causes = {r.cause.code for r in run.reports if r.cause is not None}
    assert causes == {"MultiAttach", "Unschedulable", "ContainerWaiting", "SchedulingGated", "DataSourceNotReady"}
    name = "volsync-\\x1b]0;pwned\\x07\\u202e"
    assert f"pod/shop/{name}" in render(run, "wide")
    assert name in [o["name"] for o in json.loads(render(run, "json"))["objects"]]
    assert name in [o["name"] for o in yamldocs.load(render(run, "yaml"))["objects"]]
    reports = build_reports(run.reports, OPENREPORTS, now=0)
    assert name in {r["resources"][0]["name"] for report in reports.values() for r in report["results"]}
    pinned = next(r for r in run.reports if r.name == name)
    assert pinned.node == "node-\\x1b]0;pwned\\x07\\u202e" and pinned.placement == "unknown-node"
    assert pinned.cause is not None and f"this pod is on node {pinned.node}:" in pinned.cause.message


def test_the_cli_prints_no_raw_control_character(tmp_path: Path) -> None:
    """`storage-affinity-webhook audit` as a process, every format, to a pipe and with $COLUMNS set: stdout and
    stderr printable, line by line."""
    objects = hostile_objects("".join(SEQUENCES))
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}, allow_unicode=True))
    outputs = {}
    for output, columns in (("table", ""), ("table", "60"), ("wide", ""), ("json", ""), ("yaml", "")):
        env = {**os.environ, "COLUMNS": columns}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "webhook",
                "audit",
                "--cluster",
                str(path),
                "--policy",
                str(POLICY_FILE),
                "-o",
                output,
            ],
            capture_output=True,
            check=False,
            env=env,
            timeout=120,
        )
        assert done.returncode == 1, done.stderr
        stdout = done.stdout.decode("utf-8")
        assert_printable(stdout.rstrip("\n"), f"audit -o {output} (COLUMNS={columns!r})")
        assert_printable(done.stderr.decode("utf-8").rstrip("\n"), f"audit -o {output} stderr")
        outputs[output, columns] = stdout
    as_json = json.loads(outputs["json", ""])
    assert yamldocs.load(outputs["yaml", ""]) == as_json
    wide = outputs["wide", ""]
    for obj in as_json["objects"]:
        for finding in obj["findings"]:
            assert finding["message"] in wide


def test_the_log_format_escapes_messages_and_tracebacks() -> None:
    """A log line quoting a tenant's value cannot move the cursor, set the title or forge a second line; a
    traceback keeps its lines, each escaped."""
    formatter = EscapingFormatter(LOG_FORMAT, DATE_FORMAT)
    try:
        raise KeyError("k\x1b[31m\u202e")
    except KeyError:
        exc_info = sys.exc_info()
    record = logging.LogRecord("webhook", logging.ERROR, __file__, 1, "rule %s: %s", ("\x1b]0;x\x07", "a\nb"), exc_info)
    text = formatter.format(record)
    assert_printable(text, "log")
    first, *rest = text.split("\n")
    assert first.endswith("rule \\x1b]0;x\\x07: a\\nb")
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "KeyError: 'k\\x1b[31m\\u202e'"
    assert record.getMessage() == "rule \x1b]0;x\x07: a\nb"  # other handlers get the record as it was


@pytest.mark.parametrize("text", ["plain", "a\x1bb", "\u202e"])
def test_escaping_twice_changes_nothing(text: str) -> None:
    """Why later escaping (the admission warnings, the denial message) leaves a message made escaped as it is."""
    assert escaped(escaped(text)) == escaped(text)


@pytest.mark.parametrize("field", ["failure", "over_budget"])
def test_a_decision_stores_its_texts_escaped_however_they_are_set(field: str) -> None:
    """A decision's two text fields are escaped by the record itself, when made and whenever set, so no writer
    (the pipeline, a rule, a test) can forget it; None stays None."""
    raw, shown = "timeout \x1b]0;x\x07 \u202e", "timeout \\x1b]0;x\\x07 \\u202e"
    made = Decision(failure=raw) if field == "failure" else Decision(over_budget=raw)
    assert getattr(made, field) == shown
    later = Decision()
    assert getattr(later, field) is None
    setattr(later, field, raw)
    assert getattr(later, field) == shown
    setattr(later, field, None)
    assert getattr(later, field) is None
