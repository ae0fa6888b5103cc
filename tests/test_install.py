"""What an operator installs: `make run`, `review` and `suites` need only the runtime requirements (not `[test]`);
`make dist` builds a wheel and an sdist that carry the policy files and both commands; `make chart` packages the
chart for `helm push`."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from testkit import yamldocs
from tests.support import ROOT

#: What serving and the CLI's offline commands import: the gevent worker, the app, every CLI command, one review.
IMPORTS = """
import sys, webhook.serving.worker, webhook.app.endpoints, webhook.cli.main
from webhook.cli.main import main
try:
    main(["review", "-f", "examples/mover-pod.yaml", "--cluster", "examples/cluster.yaml"])
except SystemExit:
    pass
print("\\n".join(sorted({name.split(".")[0] for name in sys.modules})))
"""


def runtime_closure() -> set[str]:
    """The distributions the package's requirements pull in, extras left out, transitively (normalized names)."""
    seen: set[str] = set()
    todo = ["storage-affinity-webhook"]
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.requires(name) or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def test_serving_and_the_cli_import_only_the_runtime_requirements() -> None:
    """A module a server or CLI path imports comes from a distribution the runtime install brings: a test tool
    imported there, or a dependency of a dependency that is not declared (gunicorn's gevent worker and `packaging`),
    would make `make run` on the runtime-only install fail."""
    out = subprocess.run(
        [sys.executable, "-c", IMPORTS], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    owners = metadata.packages_distributions()
    closure = runtime_closure()
    imported = {
        re.sub(r"[-_.]+", "-", dist).lower(): module
        for module in out.split()
        for dist in owners.get(module, ())
        if not module.startswith("_")
    }
    outside = {dist: module for dist, module in imported.items() if dist not in closure}
    assert outside == {}, f"imported from distributions the runtime install does not bring: {outside}"
    assert {"gunicorn", "gevent", "flask", "packaging"} <= set(imported)  # the check saw the server's imports


def test_run_review_and_suites_install_no_test_tools() -> None:
    dry = subprocess.run(
        ["make", "-n", "-B", "run", "review", "suites"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "--python .venv/bin/python -e ." in dry
    assert "[test]" not in dry, dry


def test_make_chart_packages_the_chart_for_a_registry(tmp_path: Path) -> None:
    subprocess.run(["make", "-s", "chart", f"DIST={tmp_path}"], cwd=ROOT, check=True, capture_output=True, timeout=120)
    chart = yamldocs.load((ROOT / "charts/storage-affinity-webhook/Chart.yaml").read_text())
    (package,) = tmp_path.glob("*.tgz")
    assert package.name == f"{chart['name']}-{chart['version']}.tgz"
    with tarfile.open(package) as tar:
        names = tar.getnames()
    assert {f"{chart['name']}/{f}" for f in ("Chart.yaml", "values.yaml", "values.schema.json")} <= set(names)
    assert not [n for n in names if "/tests/" in n or n.endswith(".pyc")], names


def test_make_dist_builds_a_wheel_with_the_policy_files_and_both_commands(tmp_path: Path) -> None:
    subprocess.run(["make", "-s", "dist", f"DIST={tmp_path}"], cwd=ROOT, check=True, capture_output=True, timeout=600)
    (wheel,) = tmp_path.glob("*.whl")
    (sdist,) = tmp_path.glob("*.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        commands = archive.read(entry_points).decode()
    assert {"rules/default_policy.yaml", "rules/policy.schema.json", "webhook/cli/main.py"} <= names
    assert not [n for n in names if n.startswith(("tests/", "testkit/", "bench/"))]
    assert "storage-affinity-webhook = webhook.cli.main:main" in commands
    assert "kubectl-storage_affinity = webhook.cli.main:kubectl_plugin" in commands
    assert sdist.name.startswith("storage_affinity_webhook-")
