"""`terms_key` is a memo key for what is derived from a term list: equal exactly when the JSON values are."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rules.kube.nodeaffinity import simplify, terms_key

SCALARS = st.sampled_from(["a", "1", "", 1, 1.0, True, None])
VALUES = st.lists(SCALARS, max_size=2)
REQUIREMENTS = st.dictionaries(
    st.sampled_from(["key", "operator", "values", "x"]),
    st.one_of(st.sampled_from(["a", "In", "Exists", 1]), VALUES),
    max_size=4,
) | st.fixed_dictionaries({"key": st.sampled_from(["a", "b"]), "operator": st.just("In"), "values": VALUES})
PARTS: st.SearchStrategy[Any] = st.one_of(
    st.lists(REQUIREMENTS, max_size=2), st.sampled_from(["", None, []])
)  # what the boundary lets through
TERMS = st.lists(
    st.dictionaries(st.sampled_from(["matchExpressions", "matchFields", "x"]), PARTS, max_size=3), max_size=2
)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@given(TERMS, TERMS)
def test_keys_are_equal_exactly_when_the_json_is(a: list[Any], b: list[Any]) -> None:
    assert (terms_key(a) == terms_key(b)) == (canonical(a) == canonical(b))


@given(TERMS)
def test_a_term_list_has_the_key_of_its_copy_with_maps_reordered(terms: list[Any]) -> None:
    reordered = [{k: term[k] for k in reversed(list(term))} for term in terms]
    assert terms_key(reordered) == terms_key(terms)


def test_simplify_keeps_requirements_that_differ_only_in_value_types() -> None:
    terms = [{"matchExpressions": [{"key": "n", "operator": "In", "values": [v]}]} for v in ("1", 1, 1.0, True)]
    assert simplify(terms) == terms
