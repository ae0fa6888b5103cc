"""Every rule table's cases as the objects their own tests review: one list for the checks that run over all of
them (the matchConditions corpus, the warnings an HTTP answer carries). A table module this list does not read
says why in `tests/rules/test_table_objects.py`, which fails for one that does neither."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rules.model import Json
from tests.rules import (
    test_coschedule,
    test_datasource,
    test_disclosure,
    test_disk,
    test_loadaffinity,
    test_nodeagents,
    test_placement,
    test_trust,
    test_velero_configmap,
    test_workload_templates,
)
from tests.support import DATA, load_yaml, merged


@dataclass(frozen=True)
class TableObject:
    """One case: its name (`<table>:<case>`, the table its module's name less `test_`, dashed: the check that
    every table is here reads it so), the cluster it runs on, its policy document, what is reviewed, and who asks
    (`userInfo.username`; None: not said)."""

    name: str
    state: list[Json]
    policy: Json | None
    obj: Json
    operation: str = "CREATE"
    old: Json | None = None
    user: str | None = None


def table_objects() -> Iterator[TableObject]:
    """Each table's cases, each object built as its own test builds it."""
    for param in test_coschedule.load_cases():
        (case,) = param.values
        state = [test_coschedule.state_object(e) for e in case.get("state", ())]
        yield TableObject(f"coschedule:{param.id}", state, case.get("policy"), test_coschedule.subject_object(case))
    for param in test_datasource.load_cases():
        (case,) = param.values
        state = test_datasource.state_objects(case.get("state", []))
        yield TableObject(f"datasource:{param.id}", state, case.get("policy"), test_datasource.subject_object(case))
    for case in test_loadaffinity.TABLE["cases"]:
        state = [*test_loadaffinity.CLUSTER, *(case.get("cluster") or ())]
        yield TableObject(
            f"loadaffinity:{case['name']}", state, case.get("policy"), test_loadaffinity.build(case["pod"])
        )
    table = test_nodeagents.TABLE
    for case in table["cases"]:
        state = [
            *test_nodeagents.CLUSTER,
            *table["nodes"],
            *table["claims"],
            *(case.get("cluster") or ()),
            *test_nodeagents.agents(case),
        ]
        pod = test_nodeagents.exposer_pod(case.get("pod") or {})
        yield TableObject(f"nodeagents:{case['name']}", state, case.get("policy"), pod)
    for case in test_placement.CONSISTENCY["cases"]:
        pod = test_placement.pod(case["spec"], case.get("namespace", "shop"))
        yield TableObject(f"placement:{case['name']}", test_placement.cluster(case), None, pod)
    for case in [*test_velero_configmap.TABLE["invalid"], *test_velero_configmap.TABLE["valid"]]:
        config_map = test_velero_configmap.config_map(case)
        state = list(test_velero_configmap.CLUSTER)
        yield TableObject(f"velero-configmap:{case['name']}", state, test_velero_configmap.SOURCE, config_map)
    for case in test_loadaffinity.VALIDATION["pod_annotations"]:
        pod = test_loadaffinity.build(
            {"role": case["role"], "claims": ["data-kibishii"], "annotations": case["annotations"]}
        )
        yield TableObject(f"load-affinity-annotation:{case['name']}", list(test_loadaffinity.CLUSTER), None, pod)
    for param in test_disk.CASES:
        (case,) = param.values
        obj = test_disk.build(case)
        operation = case.get("operation", "CREATE")
        yield TableObject(f"disk:{param.id}", [], None, obj, operation, test_disk.old_object(case, obj))
    for case in load_yaml(DATA / "own_annotations.yaml"):
        obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "app-0", "namespace": "shop", "annotations": case["annotations"]},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]},
        }
        yield TableObject(f"own-annotations:{case['name']}", [], None, obj)
    for param in test_workload_templates.CASES:
        (case,) = param.values
        for kind in test_workload_templates.kinds(case):
            obj, old = test_workload_templates.objects(case, kind)
            operation = case.get("operation", "CREATE")
            yield TableObject(f"workload-templates:{param.id}:{kind}", [], case.get("policy"), obj, operation, old)
    for param in test_trust.cases():
        claim, kind, place, _ = param.values
        obj = test_trust.build(kind, claim, place["namespace"])
        state, doc = test_trust.TABLE["state"], test_trust.TABLE["policy"]
        yield TableObject(f"trust:{param.id}", state, doc, obj, user=place.get("user"))
    for param in test_disclosure.CASES:
        (case,) = param.values
        obj = merged(test_disclosure.TABLE["pod"], case.get("pod") or {})
        yield TableObject(f"disclosure:{param.id}", test_disclosure.state(case), case.get("policy"), obj)
