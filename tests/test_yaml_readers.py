"""The suite and its tools read YAML through testkit/yamldocs (LibYAML): PyYAML's Python parser, which
`yaml.safe_load` is, made the rule tables alone cost 13 s of every test worker's collection."""

from __future__ import annotations

import ast

from tests.support import ROOT
from tests.test_code_safety import dotted

PYTHON_PARSES = {"yaml.safe_load", "yaml.safe_load_all"}
READERS = ("tests", "testkit", "bench", "scripts")


def python_parses(source: str, name: str) -> list[str]:
    return [
        f"{name}:{node.lineno}: {dotted(node.func)}"
        for node in ast.walk(ast.parse(source, name))
        if isinstance(node, ast.Call) and dotted(node.func) in PYTHON_PARSES
    ]


def test_no_test_or_tool_parses_yaml_in_python() -> None:
    files = sorted(path for folder in READERS for path in (ROOT / folder).rglob("*.py"))
    assert len(files) > 100
    found = [p for path in files for p in python_parses(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], "read YAML with testkit.yamldocs.load / load_all"


def test_the_check_finds_a_python_parse() -> None:
    assert python_parses("import yaml\nyaml.safe_load_all(text)\n", "x.py") == ["x.py:2: yaml.safe_load_all"]
    assert python_parses("from testkit import yamldocs\nyamldocs.load(text)\n", "x.py") == []
