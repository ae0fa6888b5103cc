"""YAML the tests and tools read: trusted files and the output of helm and the CLI, parsed by LibYAML.

PyYAML's Python parser took 13 s of each test worker's collection on the rule tables alone; LibYAML builds the same
values several times faster. What a user gives the webhook or the CLI goes through rules/safeload.py instead, with
its limits and checks.
"""

from __future__ import annotations

from typing import Any

import yaml


def load(text: str) -> Any:
    """The one document of `text`."""
    return yaml.load(text, Loader=yaml.CSafeLoader)


def load_all(text: str) -> list[Any]:
    """Every document of `text`, empty ones included (as None)."""
    return list(yaml.load_all(text, Loader=yaml.CSafeLoader))
