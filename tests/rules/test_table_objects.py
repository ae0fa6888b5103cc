"""Every rule table reaches `tests/rules/table_objects.py`, the objects the matchConditions corpus and the
warning-size check run over, or says here why it does not: a table left out is a set of reviews those checks skip
without a word."""

from __future__ import annotations

import re
from pathlib import Path

from tests.rules import table_objects
from tests.support import ROOT

RULE_TESTS = ROOT / "tests" / "rules"
READS_A_TABLE = re.compile(r"table_cases\(|DATA /")

#: Table modules whose cases are not reviews of a Pod, Job or workload by the webhooks, with why.
NOT_REVIEWED = {
    "test_budget": "reviews sized to the review's cost limits: the corpus would spend its time on them, and the "
    "budget tests check their answers whole",
    "test_causes": "pods as the audit finds them, already running or stuck: the audit's causes, not an admission",
    "test_ended_causes": "pods that ended, as the audit finds them: not an admission",
    "test_vm_audit": "VMs and their pods as the audit finds them: not an admission",
    "test_documents": "YAML and JSON texts for the document readers",
    "test_policy": "policy documents, not objects the webhooks review",
    "test_policy_configmap": "policy ConfigMaps, which the corpus's webhooks are not called for",
    "test_reports": "the audit's findings as reports",
    "test_selectors_roles": "label selectors and role matches on bare labels",
    "test_volumes": "volume classes of claims and PVs, read without a review",
    "test_mover_tolerations": "node taints and a Velero ConfigMap, read without a review",
    "test_velero_loaded": "node-agent pods and their flags, read without a review",
}


def table_modules() -> set[str]:
    """The rule test modules that read a table under tests/data (this one names them, and reads none)."""
    paths = (path for path in RULE_TESTS.glob("test_*.py") if path.stem != Path(__file__).stem)
    return {path.stem for path in paths if READS_A_TABLE.search(path.read_text())}


def prefix(module: str) -> str:
    """The name prefix of the cases table_objects makes of a module's table: `test_velero_configmap` →
    `velero-configmap`."""
    return module.removeprefix("test_").replace("_", "-")


def unaccounted(tables: set[str], prefixes: set[str]) -> set[str]:
    """The table modules that give table_objects no case and do not say why."""
    return {module for module in tables if prefix(module) not in prefixes} - set(NOT_REVIEWED)


def test_every_rule_table_is_in_the_corpus_or_says_why_not() -> None:
    prefixes = {case.name.split(":", 1)[0] for case in table_objects.table_objects()}
    missing = unaccounted(table_modules(), prefixes)
    assert not missing, f"add each to tests/rules/table_objects.py, or to NOT_REVIEWED here with why: {missing}"
    reviewed = {module for module in NOT_REVIEWED if prefix(module) in prefixes}
    assert not reviewed, f"in the corpus, yet said not to be: {reviewed}"
    assert set(NOT_REVIEWED) <= table_modules(), set(NOT_REVIEWED) - table_modules()


def test_a_table_module_in_neither_list_is_named() -> None:
    tables = {"test_new_rule", "test_trust", "test_budget"}
    assert unaccounted(tables, {"trust"}) == {"test_new_rule"}
