"""Nothing actionable is cut from a warning (docs/validation.md): every warning the rule tables produce, sent as the
HTTP answer carries it, keeps each node name and its whole message (cause and remedy) within the API server's
per-warning limit (k8s.io/apiserver/pkg/endpoints/filters/warning.go: 256 runes once 4 KiB are exceeded).

The tables are every rule table (tests/rules/table_objects.py), each case run once under its own policy and once
with `enforcement: warn`, so that its denials warn too.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rules import pipeline
from rules.model import Json
from tests.rules.table_objects import TableObject, table_objects
from tests.support import policy, subject, view_from
from tests.webhook.review_checks import check_response
from webhook.app.codec import WARNING_ADVISED, WARNING_LIMIT, build_response, fit_warning
from webhook.cli.review import as_request


def node_names(state: list[Json]) -> set[str]:
    """The names of the Nodes of a case and every node a pod of it runs on."""
    names = {str(o["metadata"]["name"]) for o in state if o.get("kind") == "Node"}
    return names | {str(o["spec"]["nodeName"]) for o in state if (o.get("spec") or {}).get("nodeName")}


def emitted(case: TableObject, doc: Json | None) -> list[tuple[str, list[str]]]:
    """(reason, the warnings the HTTP answer carries for it) of every warning the mutating and validating webhooks
    give; the answers pass the API server's checks and carry every reason (none is left out for the total)."""
    obj, view = case.obj, view_from(*case.state)
    chain = pipeline.mutate_then_validate(subject(obj, case.operation, case.old, case.user), view, policy(doc))
    request = as_request(obj)
    review: Json = {"apiVersion": request.api_version, "kind": "AdmissionReview"}
    review["request"] = {"uid": request.uid, "operation": "CREATE", "object": obj}
    out: list[tuple[str, list[str]]] = []
    for decision, mutating in ((chain.mutation, True), (chain.validation, False)):
        answer = build_response(request, decision, mutating=mutating)
        check_response(review, answer, mutating=mutating)
        fitted = [(reason, fit_warning(reason)) for reason in decision.warnings]
        assert answer["response"].get("warnings", []) == [part for _, parts in fitted for part in parts]
        out += fitted
    return out


def _collect() -> list[tuple[str, set[str], str, list[str]]]:
    found: list[tuple[str, set[str], str, list[str]]] = []
    for case in table_objects():
        nodes = node_names(case.state)
        for enforcement, run in (("own", case.policy), ("warn", {**(case.policy or {}), "enforcement": "warn"})):
            for reason, parts in emitted(case, run):
                found.append((f"{case.name} ({enforcement} policy)", nodes, reason, parts))
    return found


WARNINGS = _collect()
FIELD = re.compile(r"^(?P<path>[^\s:]+): (?P<message>.+)$")


def test_the_corpus_has_long_warnings_naming_nodes() -> None:
    """The check below must be able to fail: the corpus has warnings past the advised 120 that name nodes, and
    some longer than the API server's limit."""
    reasons = {reason for _, _, reason, _ in WARNINGS}
    assert len(reasons) > 60
    long_with_nodes = [r for _, nodes, r, _ in WARNINGS if len(r) > WARNING_ADVISED and any(n in r for n in nodes)]
    assert len(long_with_nodes) >= 3
    assert any(len(r) > WARNING_LIMIT for r in reasons)


@pytest.mark.parametrize(("case", "nodes", "reason", "parts"), [pytest.param(*w, id=w[0]) for w in WARNINGS])
def test_node_names_and_the_whole_message_survive(case: str, nodes: set[str], reason: str, parts: list[str]) -> None:
    assert all(0 < len(part) <= WARNING_LIMIT for part in parts)
    if len(reason) <= WARNING_ADVISED:
        assert parts == [reason]
        return
    said = " ".join([parts[0], *(part.removeprefix("… ") for part in parts[1:])])
    for node in nodes:
        if re.search(rf"(?<![\w.-]){re.escape(node)}(?![\w-])", reason):
            assert re.search(rf"(?<![\w.-]){re.escape(node)}(?![\w-])", said), f"{case}: node {node} lost"
    field = FIELD.match(reason)
    message = field["message"] if field else reason
    assert said.startswith(message), f"{case}: the cause and remedy come first, whole"
    if field:
        assert said.endswith(f" (at {field['path']})"), f"{case}: the field path {field['path']} lost or cut"


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        pytest.param(
            "spec.volumes[0].persistentVolumeClaim.claimName: " + "m" * 150,
            ["m" * 150 + " (at spec.volumes[0].persistentVolumeClaim.claimName)"],
            id="the path goes after the message",
        ),
        pytest.param(
            "spec.template.spec.volumes[12].persistentVolumeClaim.claimName: " + "m" * 220,
            ["m" * 220 + " (at", "… spec.template.spec.volumes[12].persistentVolumeClaim.claimName)"],
            id="a long path continues whole in a second warning",
        ),
        pytest.param(
            "metadata.annotations[backup.velero.io/backup-volumes]: " + "m " * 119 + "m",
            ["m " * 119 + "m (at", "… metadata.annotations[backup.velero.io/backup-volumes])"],
            id="a path is never split inside its brackets",
        ),
        pytest.param(
            "spec.volumes[0].persistentVolumeClaim.claimName: " + "m" * 240,
            ["m" * 240 + " (at", "… spec.volumes[0].persistentVolumeClaim.claimName)"],
            id="nor dropped",
        ),
        pytest.param(
            "on node " + "n" * 150 + ", held by " + "p" * 100 + ": remedy",
            ["on node " + "n" * 150 + ",", "… held by " + "p" * 100 + ": remedy"],
            id="a message over the limit continues between clauses",
        ),
        pytest.param("x" * 300, ["x" * 256, "… " + "x" * 44], id="one word over the limit"),
        pytest.param("load affinity skipped: " + "w" * 110, ["load affinity skipped: " + "w" * 110], id="no path"),
    ],
)
def test_a_long_warning_is_fitted_message_first_nothing_cut(reason: str, expected: list[str]) -> None:
    assert fit_warning(reason) == expected
    assert all(len(part) <= WARNING_LIMIT for part in expected)


@given(st.text(alphabet=st.sampled_from("ab :;,.…\u202e"), max_size=2000))
@example("a, " + "x" * 300)  # after the first part, the only space is the continuation mark's
@example("a: " + "b " * 140)  # a field warning whose message alone is over the limit keeps its path
def test_any_text_is_fitted_in_parts_within_the_limit_losing_no_word(text: str) -> None:
    """Whatever the spacing (a space right after the continuation mark, words longer than the limit), fitting ends
    with every part within the limit and every non-space character kept, in order: a long `path: message` as
    `message (at path)`."""
    parts = fit_warning(text)
    assert all(len(part) <= WARNING_LIMIT for part in parts)
    kept = "".join(part.removeprefix("… ") if i else part for i, part in enumerate(parts))
    field = FIELD.match(text)
    expected = f"{field['message']} (at {field['path']})" if field and len(text) > WARNING_ADVISED else text
    assert [c for c in kept if not c.isspace()] == [c for c in expected if not c.isspace()]
