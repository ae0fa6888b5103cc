"""Policy test suites: finding `storage-affinity-test.yaml` files and reading one into cases ready to review.

A suite that is bad in any way (an unknown or missing key, a file that cannot be read, two cases of one name, an
object `review` does not check, both or neither of `object` and `resource`) is not run: every problem is listed,
each with its file and key, and the other suites still run. Paths in a suite are relative to the suite file, and
must lead under `test --root` (default: the working directory, as CI's checkout) to a regular file of bounded size
(webhook/files.py): a suite may come from a pull request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rules.kube.feasible import pod_of
from rules.kube.shapes import object_problems
from rules.model import Json
from rules.pipeline import VALIDATED_KINDS
from rules.policy import Policy, PolicyError
from rules.safeload import DocumentError, load_documents, unreadable
from webhook.app.codec import AdmissionRequest, ReviewError
from webhook.cli.expect import expect_problems
from webhook.cli.review import as_request
from webhook.cli.suites import SUITE_FILE
from webhook.files import read_text
from webhook.policy.file import load_policy_file
from webhook.state.index import ClusterIndex
from webhook.state.static import load_static_state

SUITE_KEYS = ("policy", "cluster", "cases")
CASE_KEYS = ("name", "object", "resource", "expect")


@dataclass(frozen=True)
class Case:
    name: str
    request: AdmissionRequest
    expect: Json


@dataclass
class Suite:
    """One suite file: what its cases run against, or the problems that keep it from running."""

    path: Path
    root: Path = Path()
    policy: Policy | None = None
    view: ClusterIndex | None = None
    cases: list[Case] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def problem(self, key: str, message: str) -> None:
        self.problems.append(f"{self.path}: {key}: {message}" if key else f"{self.path}: {message}")


def find_suites(paths: Iterable[str]) -> tuple[list[Path], list[str]]:
    """The suite files named, or found (recursively, sorted) under the directories named; and the problems of
    paths that hold none."""
    found: list[Path] = []
    problems: list[str] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            inside = sorted(path.rglob(SUITE_FILE))
            found += inside
            if not inside:
                problems.append(f"{path}: no {SUITE_FILE} under this directory")
        elif path.is_file():
            found.append(path)
        else:
            problems.append(unreadable(name, FileNotFoundError(2, "No such file or directory")))
    return list(dict.fromkeys(found)), problems


def load_suite(path: Path, policy_file: Path | None = None, *, root: Path | None = None) -> Suite:
    """Read a suite; `policy_file` replaces the suite's own policy (trying a changed policy on every suite); the
    files it names are read under `root` (default: the working directory)."""
    suite = Suite(path, root=root if root is not None else Path.cwd())
    try:
        documents = load_documents(read_text(path), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        suite.problems.append(unreadable(str(path), exc))
        return suite
    except DocumentError as exc:
        suite.problems.append(str(exc))
        return suite
    if len(documents) != 1 or not isinstance(documents[0], Mapping):
        suite.problem("", "must be one YAML document, a map with policy, cluster and cases")
        return suite
    doc = documents[0]
    for key in doc:
        if key not in SUITE_KEYS:
            suite.problem(str(key), f"unknown key (a suite has: {', '.join(SUITE_KEYS)})")
    _load_policy(suite, doc.get("policy"), policy_file)
    _load_cluster(suite, doc.get("cluster", []))
    cases = doc.get("cases")
    if not isinstance(cases, list) or not cases:
        suite.problem("cases", "missing: a list of cases, each with name, object or resource, and expect")
        return suite
    seen: dict[str, int] = {}
    for index, case in enumerate(cases):
        _load_case(suite, index, case, seen)
    if suite.problems:
        suite.cases = []
    return suite


def _load_policy(suite: Suite, name: Any, override: Path | None) -> None:
    if name is not None and not isinstance(name, str):
        suite.problem("policy", "must be a file name (a policy ConfigMap or a bare policy)")
        return
    chosen = override if override is not None else (_relative(suite, name) if name else None)
    try:
        suite.policy, _ = load_policy_file(chosen, root=None if override is not None else suite.root)
    except PolicyError as exc:
        suite.problem("policy", str(exc))


def _load_cluster(suite: Suite, names: Any) -> None:
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        suite.problem("cluster", "must be a list of manifest files")
        return
    try:
        suite.view = load_static_state((_relative(suite, n) for n in names), root=suite.root)
    except DocumentError as exc:
        suite.problem("cluster", str(exc))


def _load_case(suite: Suite, index: int, case: Any, seen: dict[str, int]) -> None:
    key = f"cases[{index}]"
    if not isinstance(case, Mapping):
        suite.problem(key, "must be a map with name, object or resource, and expect")
        return
    for unknown in (k for k in case if k not in CASE_KEYS):
        suite.problem(f"{key}.{unknown}", f"unknown key (a case has: {', '.join(CASE_KEYS)})")
    name = case.get("name")
    if not isinstance(name, str) or not name:
        suite.problem(f"{key}.name", "missing: every case has a name, unique in its suite")
    elif name in seen:
        suite.problem(f"{key}.name", f'"{name}" is also the name of cases[{seen[name]}]')
    else:
        seen[name] = index
    found = _case_object(suite, key, case)
    request = _case_request(suite, *found) if found is not None else None
    runs_pods = request is not None and pod_of(request.subject.kind, {}) is not None
    if "expect" not in case:
        suite.problem(f"{key}.expect", "missing: what the review must answer (at least `allowed`)")
        return
    for where, message in expect_problems(case["expect"], runs_pods or request is None):
        suite.problem(f"{key}.expect.{where}".rstrip("."), message)
    if request is not None and isinstance(name, str) and isinstance(case["expect"], Mapping):
        suite.cases.append(Case(name, request, dict(case["expect"])))


def _case_object(suite: Suite, key: str, case: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The case's object and the key it came from: the file `object` names, or `resource` inline; None (with a
    problem) otherwise."""
    if ("object" in case) == ("resource" in case):
        suite.problem(key, "needs exactly one of `object` (a file) and `resource` (the object inline)")
        return None
    if "resource" in case:
        return f"{key}.resource", case["resource"]
    name = case["object"]
    if not isinstance(name, str):
        suite.problem(f"{key}.object", "must be a file name")
        return None
    path = _relative(suite, name)
    try:
        documents = load_documents(read_text(path, root=suite.root), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        suite.problem(f"{key}.object", unreadable(str(path), exc))
        return None
    except DocumentError as exc:
        suite.problem(f"{key}.object", str(exc))
        return None
    if len(documents) != 1:
        suite.problem(f"{key}.object", f"{path}: expected exactly one document, found {len(documents)}")
        return None
    return f"{key}.object", documents[0]


def _case_request(suite: Suite, where: str, obj: Any) -> AdmissionRequest | None:
    """The object as the API server would send it, if `review` checks its kind and its fields' types."""
    try:
        request = as_request(obj)
    except ReviewError as exc:
        suite.problem(where, exc.message)
        return None
    kind = request.subject.kind
    if kind not in VALIDATED_KINDS:
        suite.problem(where, f'kind "{kind}" is not reviewed (review checks {", ".join(VALIDATED_KINDS)})')
        return None
    if isinstance(request.subject.obj, dict) and (types := object_problems(kind, request.subject.obj).types):
        for path, message in types:
            suite.problem(where, f"{path}: {message}")
        return None
    return request


def _relative(suite: Suite, name: str) -> Path:
    return suite.path.parent / name
