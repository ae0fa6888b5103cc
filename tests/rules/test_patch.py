from __future__ import annotations

import copy

import jsonpatch

from rules.model import Json
from rules.patch import PatchBuilder


def test_add_under_missing_maps_creates_the_shallowest_missing_parent() -> None:
    doc = {"metadata": {"name": "p"}, "spec": {}}
    builder = PatchBuilder(doc)
    builder.set("metadata", "annotations", "storage-affinity.io/x", value="1")
    builder.set("metadata", "annotations", "a/b~c", value="2")
    builder.set("spec", "affinity", "nodeAffinity", "required", value={"t": 1})
    ops = builder.operations()
    assert ops == [
        {"op": "add", "path": "/metadata/annotations", "value": {"storage-affinity.io/x": "1", "a/b~c": "2"}},
        {"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {"required": {"t": 1}}}},
    ]
    assert doc == {"metadata": {"name": "p"}, "spec": {}}, "the original must never be modified"
    result = jsonpatch.apply_patch(copy.deepcopy(doc), ops)
    assert result["metadata"]["annotations"]["a/b~c"] == "2"


def test_existing_keys_are_escaped_and_replaced() -> None:
    doc = {"metadata": {"annotations": {"a/b": "old"}}, "spec": {"tolerations": [{"key": "x"}]}}
    builder = PatchBuilder(doc)
    builder.set("metadata", "annotations", "a/b", value="new")
    builder.set("spec", "tolerations", value=[{"key": "x"}, {"key": "y"}])
    assert builder.operations() == [
        {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "new"},
        {"op": "replace", "path": "/spec/tolerations", "value": [{"key": "x"}, {"key": "y"}]},
    ]


def test_no_op_writes_produce_no_patch() -> None:
    doc = {"spec": {"nodeName": "n1"}}
    builder = PatchBuilder(doc)
    builder.set("spec", "nodeName", value="n1")
    assert builder.operations() == []
    assert not builder.changed


def test_reads_see_earlier_writes_and_scopes_share_them() -> None:
    doc: Json = {"spec": {"template": {"spec": {}}}}
    root = PatchBuilder(doc)
    template = root.scoped(("spec", "template"))
    template.set("spec", "nodeSelector", value={"a": "b"})
    assert template.get("spec", "nodeSelector", "a") == "b"
    assert root.get("spec", "template", "spec", "nodeSelector") == {"a": "b"}
    assert root.operations() == [{"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"a": "b"}}]


def test_null_parent_is_replaced() -> None:
    doc = {"spec": {"affinity": None}}
    builder = PatchBuilder(doc)
    builder.set("spec", "affinity", "nodeAffinity", value={})
    assert builder.operations() == [{"op": "replace", "path": "/spec/affinity", "value": {"nodeAffinity": {}}}]
