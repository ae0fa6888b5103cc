"""Shared test helpers: cluster views from manifests, subjects, and the patch check every mutation test uses.

`check_patch` applies a patch with jsonpatch and validates the result strictly against the official Kubernetes
schema, so no test can let an invalid pod leave the webhook.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import kubernetes_validate.utils
import pytest
from flask.testing import FlaskClient

from rules import deadline, pipeline
from rules.model import Decision, Json, Severity, Subject
from rules.policy import Policy, default_policy, policy_from_document
from testkit import yamldocs
from webhook.app.endpoints import create_app
from webhook.runtime import Runtime
from webhook.state.index import ClusterIndex
from webhook.state.static import load_static_state, read_manifests

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
EXAMPLES = ROOT / "examples"
FIXTURES = DATA / "admissionreviews"
K8S_VERSION = "1.37.0"
SMALL_BODY = 64 * 1024  # the body limit of the shared `client` fixture (tests/conftest.py)


def counted_deadline_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that every `deadline.check()` from now on appends to: a loop's work counted, never timed."""
    checks: list[int] = []
    real = deadline.check

    def counted() -> None:
        checks.append(1)
        real()

    monkeypatch.setattr(deadline, "check", counted)
    return checks


def view_from(*objects: Json) -> ClusterIndex:
    index = ClusterIndex()
    for obj in objects:
        index.apply(obj)
    return index


def example_runtime(pol: Policy | None = None, namespace: str = "saw") -> Runtime:
    """A runtime over examples/cluster.yaml, the cluster the examples are reviewed against (default policy)."""
    return Runtime(
        policy=pol or default_policy(), view=load_static_state([EXAMPLES / "cluster.yaml"]), namespace=namespace
    )


def app_client(runtime: Runtime | None = None, **app_args: Any) -> FlaskClient:
    """The Flask test client of the webhook's app around `runtime` (by default `example_runtime()`); `app_args`
    go to `create_app`. Every in-process webhook test builds its client here."""
    return create_app(runtime or example_runtime(), **app_args).test_client()


def subject(obj: Json, operation: str = "CREATE", old: Json | None = None, user: str | None = None) -> Subject:
    """The subject the API server would describe; `user` is its `userInfo.username` (None: not said)."""
    api_version = str(obj.get("apiVersion", "v1"))
    return Subject(
        kind=str(obj["kind"]),
        operation=operation,
        namespace=str((obj.get("metadata") or {}).get("namespace") or "default"),
        name=str((obj.get("metadata") or {}).get("name") or ""),
        obj=obj,
        old=old,
        group=api_version.rpartition("/")[0],
        user=user,
    )


def policy(doc: Json | None = None) -> Policy:
    return default_policy() if doc is None else policy_from_document(doc)


def dig(obj: Any, *path: str) -> Any:
    """The value at `path` in nested objects, or None where a part is missing."""
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def merged(base: Json, override: Json) -> Json:
    """`override` laid over `base`: mappings merge key by key (as Helm merges values files), anything else replaces
    (so a case can swap a pod's whole volume list); the result shares nothing with either."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        nested = isinstance(value, dict) and isinstance(base.get(key), dict)
        out[key] = merged(base[key], value) if nested else copy.deepcopy(value)
    return out


def manifest_objects(*paths: Path) -> list[Json]:
    """Every object of manifest files, read as `--cluster` reads them."""
    return [obj for _, obj in read_manifests(paths)]


def load_yaml(path: Path) -> Any:
    return yamldocs.load(path.read_text())


# kubernetes_validate reads and parses a kind's schema file and the shared definitions on every call (about 18 ms
# of a 19 ms validation); they never change during a run, so each file is parsed once. Nothing mutates a schema.
kubernetes_validate.utils.schema_contents = functools.cache(kubernetes_validate.utils.schema_contents)


def validate_strict(obj: Json) -> None:
    """Raise when the object is not valid against the official schema (strict: no unknown fields)."""
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def check_patch(original: Json, patch: list[Json]) -> Json:
    """Apply the patch as the API server would and validate the result; returns the mutated object."""
    result: Json = jsonpatch.apply_patch(copy.deepcopy(original), patch)
    validate_strict(result)
    return result


def mutate_checked(
    obj: Json, view: Any, pol: Policy | None = None, own_namespace: str = "", user: str | None = None
) -> tuple[Decision, Json]:
    """Mutate, check the patch, and check that reviewing the result again yields no patch (idempotence)."""
    pol = pol or default_policy()
    decision = pipeline.mutate(subject(obj, user=user), view, pol, own_namespace)
    result = check_patch(obj, decision.patch)
    again = pipeline.mutate(subject(result, user=user), view, pol, own_namespace)
    assert again.patch == [], f"re-review produced a patch: {again.patch}"
    return decision, result


def table_cases(where: Path, keys: set[str] | None = None, *, section: str = "") -> list[Any]:
    """Every case of the YAML tables at `where` (one file, or each file of a directory but its library.yaml) as
    pytest params, ids `<table>:<name>`, unique. A table that is a mapping holds its cases under `section` (its other
    keys hold what the cases share). A case may use only `keys` (when given) and `source`: the upstream object, issue
    or reference design section it reproduces (`owner/repo#N`, an upstream file, or
    `../shared/reference/<file> §<section>`), which tests/test_tables_sourced.py requires of every case of every
    table, whichever loader reads it."""
    tables = sorted(p for p in where.glob("*.yaml") if p.name != "library.yaml") if where.is_dir() else [where]
    params = []
    for path in tables:
        doc = load_yaml(path)
        for case in doc[section] if section else doc:
            unknown = set(case) - keys - {"source"} if keys is not None else set()
            assert not unknown, f"{path.name}: {case.get('name')}: unknown keys {unknown}"
            params.append(pytest.param(case, id=f"{path.stem}:{case['name']}"))
    ids = [param.id for param in params]
    assert len(ids) == len(set(ids)), f"{where.name}: two cases of a table share a name"
    return params


def check_table_case(case: Json, view: Any, pol: Policy, obj: Json) -> Decision:
    """A placement table's case: the mutation (checked as `mutate_checked` does) gives the case's `patch`,
    `warnings`, `reasons` (each a part of one) and `audit`; validating the result denies exactly its
    `violations` and warns exactly its `validation_warnings` (both `{field, message}`), which are all the warnings
    the validating webhook answers. Returns the validation, for what a table checks beyond that."""
    mutation, result = mutate_checked(obj, view, pol)
    assert mutation.patch == case["patch"]
    assert mutation.warnings == case.get("warnings", [])
    for expected in case.get("reasons", ()):
        assert any(expected in reason for reason in mutation.reasons), (expected, mutation.reasons)
    if "audit" in case:
        assert mutation.audit == case["audit"]
    validation = pipeline.validate(subject(result), view, pol)
    denials = [{"field": f.field, "message": f.message} for f in validation.findings if f.severity is Severity.DENY]
    assert denials == case.get("violations", [])
    assert validation.allowed == (not denials)
    warned = [f for f in validation.findings if f.severity is Severity.WARN]
    assert [{"field": f.field, "message": f.message} for f in warned] == case.get("validation_warnings", [])
    assert validation.warnings == [f.text() for f in warned]
    return validation


@functools.cache
def fixtures() -> list[tuple[str, Json]]:
    """The foreign AdmissionReviews of tests/data/admissionreviews (sources in its SOURCES.md), bare requests
    wrapped in an envelope as kube-apiserver would send them."""
    import json

    out = []
    for path in sorted(FIXTURES.glob("*.json")):
        doc = json.loads(path.read_text())
        if "request" not in doc:
            doc = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": doc}
        out.append((path.name, doc))
    return out


def load_script(path: Path) -> Any:
    """A script of scripts/ (not a package) as a module, to test its functions."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
