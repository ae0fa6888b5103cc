"""The policy schema states the rules the server's worded checks make, exactly: the chart's values schema is
generated from it, so `helm install` refuses a value exactly when the server would (tests/chart has the corpus);
and no raw schema message reaches an operator where a worded one exists."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from rules.policy import _schema, policy_problems
from rules.policychecks import semantic_problems

#: Characters that make or break names, label keys and values, and sizes at their limits.
_TEXT = st.builds(
    "".join,
    st.lists(st.sampled_from("aZ09-._/ "), min_size=0, max_size=8).flatmap(
        lambda head: st.sampled_from((0, 1, 53, 54, 55, 62, 63, 64, 245, 246, 300)).map(lambda n: [*head, "a" * n])
    ),
)
_INTEGER = st.builds(
    lambda sign, digits: sign + digits,
    st.sampled_from(("", "+", "-")),
    st.sampled_from(("0", "1" * 18, "9223372036854775807", "9223372036854775808", "1" * 20, "1e3", "9" * 19)),
)


def _docs() -> st.SearchStrategy[dict[str, Any]]:
    selector = st.fixed_dictionaries({"matchLabels": st.dictionaries(_TEXT, _TEXT, min_size=1, max_size=1)})
    requirement = st.fixed_dictionaries(
        {"key": _TEXT, "operator": st.sampled_from(("In", "Gt")), "values": st.lists(_TEXT, max_size=1)}
    )
    return st.one_of(
        st.builds(lambda ns: {"excludedNamespaces": [ns]}, _TEXT),
        st.builds(lambda s: {"roles": {"mover": {"selectors": [s]}}}, selector),
        st.builds(lambda c, t: {"backupPVC": {c: {"storageClass": t}}}, _TEXT, _TEXT),
        st.builds(lambda ns, n: {"loadAffinitySource": {"configMap": {"namespace": ns, "name": n}}}, _TEXT, _TEXT),
        st.builds(lambda ns: {"nodeAgent": {"namespace": ns}}, _TEXT),
        st.builds(
            lambda r, sc: {"loadAffinity": [{"nodeSelector": {"matchExpressions": [r]}, "storageClass": sc}]},
            requirement,
            _TEXT,
        ),
        st.builds(
            lambda v: {
                "loadAffinity": [
                    {"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Lt", "values": [v]}]}}
                ]
            },
            _INTEGER,
        ),
        st.builds(
            lambda k, op, v, s: {"tolerations": [{"key": k, "operator": op, "value": v, **s}]},
            _TEXT,
            st.sampled_from(("Equal", "Exists")),
            _TEXT,
            st.sampled_from(({}, {"tolerationSeconds": 5}, {"tolerationSeconds": 5, "effect": "NoExecute"})),
        ),
    )


@settings(max_examples=1500, deadline=None)
@given(doc=_docs())
def test_the_schema_refuses_exactly_what_the_worded_checks_refuse(doc: dict[str, Any]) -> None:
    schema_refuses = not jsonschema.Draft202012Validator(_schema()).is_valid(doc)
    worded = semantic_problems(doc)
    assert schema_refuses == bool(worded), worded
    assert policy_problems(doc) == sorted(dict.fromkeys(worded), key=lambda p: p[0])  # the worded ones only
