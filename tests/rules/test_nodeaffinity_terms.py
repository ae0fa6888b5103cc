"""Term algebra: duplicates and implied terms are recognised by JSON equality, never by looser Python equality."""

from __future__ import annotations

from rules.kube.nodeaffinity import and_terms, simplify, terms_imply


def req(key: str, *values: object, operator: str = "In") -> dict[str, object]:
    return {"key": key, "operator": operator, "values": list(values)}


def test_duplicate_terms_are_one_whatever_the_key_order() -> None:
    a = {"matchExpressions": [req("zone", "a")]}
    b = {"matchExpressions": [{"values": ["a"], "operator": "In", "key": "zone"}]}
    assert simplify([a, b]) == [a]


def test_values_that_python_equates_but_json_does_not_stay_apart() -> None:
    terms = [{"matchExpressions": [req("n", v)]} for v in (1, True, "1", 1.0)]
    assert simplify(terms) == terms


def test_a_stricter_term_is_dropped_from_an_or() -> None:
    loose = {"matchExpressions": [req("zone", "a")]}
    strict = {"matchExpressions": [req("zone", "a"), req("disk", "ssd")]}
    assert simplify([strict, loose]) == [loose]
    assert terms_imply([strict], [loose]) and not terms_imply([loose], [strict])


def test_fields_and_expressions_are_compared_apart() -> None:
    by_field = {"matchFields": [req("metadata.name", "n1")]}
    by_label = {"matchExpressions": [req("metadata.name", "n1")]}
    assert not terms_imply([by_field], [by_label])
    assert simplify([by_field, by_label]) == [by_field, by_label]


def test_and_of_ors_drops_the_products_an_other_product_admits() -> None:
    left = [{"matchExpressions": [req("zone", "a")]}, {"matchExpressions": [req("zone", "b")]}]
    right = [{"matchExpressions": [req("zone", "a")]}, {"matchExpressions": [req("disk", "ssd")]}]
    result = and_terms(left, right)
    # zone=a∧zone=a is zone=a, which admits zone=a∧disk=ssd and zone=b∧zone=a; zone=b∧disk=ssd stays
    assert result == [
        {"matchExpressions": [req("zone", "a")]},
        {"matchExpressions": [req("zone", "b"), req("disk", "ssd")]},
    ]
    assert terms_imply(result, left)
    assert not terms_imply(left, result)
