"""What the shipped packages must never do: unsafe YAML loading, pickle, eval/exec, a shell; and the image's user.

Checked on the syntax tree, so comments and strings don't count and aliases (`from yaml import load`) do.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGES = ("rules", "webhook", "certs")
SAFE_LOADERS = {"SafeLoader", "CSafeLoader", "_JsonTypesLoader"}  # _JsonTypesLoader: rules/safeload.py, a SafeLoader
UNSAFE_MODULES = {"pickle", "cPickle", "marshal", "shelve", "dill"}
UNSAFE_CALLS = {"eval", "exec", "compile", "__import__", "os.system", "os.popen", "yaml.unsafe_load", "yaml.full_load"}
YAML_LOADS = {"yaml.load", "yaml.load_all"}


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def problems(source: str, name: str) -> list[str]:
    tree = ast.parse(source, name)
    aliases: dict[str, str] = {}  # local name -> module.name, from `from x import y [as z]`
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in UNSAFE_MODULES:
                    found.append(f"{name}:{node.lineno}: imports {module}")
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = dotted(node.func)
        called = aliases.get(called, called)
        where = f"{name}:{node.lineno}"
        if called in UNSAFE_CALLS:
            found.append(f"{where}: calls {called}")
        for keyword in node.keywords:
            if keyword.arg == "shell" and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                found.append(f"{where}: {called} with shell=...")
        if called in YAML_LOADS:
            loader = next((k.value for k in node.keywords if k.arg == "Loader"), None)
            if loader is None and len(node.args) > 1:
                loader = node.args[1]
            if loader is None or dotted(loader).rsplit(".", 1)[-1] not in SAFE_LOADERS:
                found.append(f"{where}: {called} without a safe Loader")
    return found


def package_files() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_packages_have_no_unsafe_loading_evaluation_or_shell() -> None:
    files = package_files()
    assert len(files) > 20
    found = [p for path in files for p in problems(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == []


def test_the_json_types_loader_is_a_safe_loader() -> None:
    import yaml

    from rules.safeload import _JsonTypesLoader

    assert issubclass(_JsonTypesLoader, yaml.SafeLoader)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import yaml\nyaml.load(text)", "yaml.load without a safe Loader"),
        ("import yaml\nyaml.load_all(text, Loader=yaml.FullLoader)", "yaml.load_all without a safe Loader"),
        ("from yaml import load\nload(text, yaml.UnsafeLoader)", "yaml.load without a safe Loader"),
        ("import yaml\nyaml.unsafe_load(text)", "calls yaml.unsafe_load"),
        ("import pickle\n", "imports pickle"),
        ("from marshal import loads\n", "imports marshal"),
        ("eval(text)", "calls eval"),
        ("exec(text)", "calls exec"),
        ("import os\nos.system(cmd)", "calls os.system"),
        ("import subprocess\nsubprocess.run(cmd, shell=True)", "subprocess.run with shell=..."),
        ("import subprocess\nsubprocess.run(cmd, shell=flag)", "subprocess.run with shell=..."),
    ],
)
def test_the_scanner_finds_each_unsafe_pattern(source: str, expected: str) -> None:
    (found,) = problems(source, "x.py")
    assert found.endswith(expected), found
    assert problems("import yaml\nyaml.load(t, Loader=yaml.SafeLoader)\nsubprocess.run(c, shell=False)", "ok") == []


def test_the_image_runs_as_a_numeric_non_root_user() -> None:
    """Numeric, so the kubelet can enforce the chart's runAsNonRoot without a passwd lookup."""
    users = re.findall(r"^USER\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert users, "the Dockerfile sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0, users[-1]
    assert gid == "" or (gid.isdigit() and int(gid) != 0), users[-1]
