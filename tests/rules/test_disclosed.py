"""Reading a pod's node constraints on the labels its author may know (rules/kube/disclosed.py): what is left
out, what stays because it does not depend on any label, and which keys a policy discloses."""

from __future__ import annotations

from rules.kube.disclosed import EVERY_LABEL, disclosed_keys, disclosed_selector, disclosed_spec, disclosed_terms
from rules.model import Json
from tests.support import policy

ZONE = "topology.kubernetes.io/zone"
KEYS = disclosed_keys(())
PIN = {"key": "metadata.name", "operator": "In", "values": ["node-7"]}


def expr(key: str, operator: str = "In", *values: str) -> Json:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


def test_requirements_on_undisclosed_keys_are_left_out_and_matchfields_stay() -> None:
    terms = [{"matchFields": [PIN], "matchExpressions": [expr("rank", "Gt", "5"), expr(ZONE, "In", "a")]}]
    assert disclosed_terms(terms, KEYS) == [{"matchFields": [PIN], "matchExpressions": [expr(ZONE, "In", "a")]}]


def test_a_term_left_with_nothing_may_hold_anywhere_so_the_terms_constrain_nothing() -> None:
    assert (
        disclosed_terms(
            [{"matchExpressions": [expr(ZONE, "In", "a")]}, {"matchExpressions": [expr("gpu", "Exists")]}], KEYS
        )
        is None
    )


def test_what_matches_no_node_whatever_the_labels_stays() -> None:
    empty: list[Json] = [{}]
    unparsable = [{"matchExpressions": [expr("rank", "Gt", "five")]}]
    assert disclosed_terms(empty, KEYS) is empty
    assert disclosed_terms(unparsable, KEYS) is unparsable


def test_nothing_undisclosed_gives_the_same_objects_back() -> None:
    spec = {
        "nodeSelector": {ZONE: "a"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expr(ZONE, "In", "a")]}]
                }
            }
        },
    }
    assert disclosed_spec(spec, KEYS) is spec
    assert disclosed_selector({"gpu": "a100", ZONE: "a"}, KEYS) == {ZONE: "a"}
    assert disclosed_spec({"nodeSelector": {"gpu": "a100"}}, KEYS)["nodeSelector"] == {}


def test_the_policy_discloses_the_keys_its_load_affinity_names_and_the_operator_reads_every_one() -> None:
    pol = policy(
        {
            "loadAffinity": [
                {"nodeSelector": {"matchLabels": {"pool": "b"}, "matchExpressions": [expr("tier", "Exists")]}}
            ]
        }
    )
    assert {"pool", "tier", ZONE, "kubernetes.io/hostname", "beta.kubernetes.io/arch"} <= pol.disclosed_node_labels
    assert "gpu" not in pol.disclosed_node_labels
    assert "gpu" in disclosed_keys((), every=True) and disclosed_keys((), every=True) is EVERY_LABEL
