#!/usr/bin/env python3
"""Write the chart's README.md (what `helm show readme` prints) from values.yaml: every value with its default and
the comment above it, so the two cannot drift.

As helm-docs reads values.yaml: a key whose comment block starts with `-- ` is one value, whatever it holds (a
map of them too, such as `resources`), with that comment as its description; a map commented without `-- ` is a
section, its comment heading the values under it; any other key that holds a scalar, a list or an empty map is a
value too, and so is a map written in flow style on its key's line.
Usage: chart-readme.py          rewrite charts/storage-affinity-webhook/README.md
       chart-readme.py --check  exit 1 when README.md is out of date
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "storage-affinity-webhook"
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?: |$)")

HEAD = """# storage-affinity-webhook

{description}

Install (the image is built from the repository's `Dockerfile`; docs/operations.md says how to build, push and pin
it):

```console
$ helm install storage-affinity-webhook oci://REGISTRY/charts/storage-affinity-webhook \\
  --namespace storage-affinity --create-namespace --set image.repository=REGISTRY/storage-affinity-webhook
```

Kubernetes {kube_version}. Every value is checked by `values.schema.json`: an unknown key or a policy the server
would refuse fails `helm install`. The policy (`policy`) is documented field by field in the repository's
docs/policy.md.

This file is generated from values.yaml by `scripts/chart-readme.py` (`make docs`); edit the comments there.

## Values
"""


def described(lines: list[str]) -> list[tuple[str, int, str, bool]]:
    """(key, indentation, the comment block right above it, whether it is a `-- ` value comment) for every `key:`
    line, in order."""
    found: list[tuple[str, int, str, bool]] = []
    comment: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
            continue
        match = KEY.match(line)
        if match:
            marked = bool(comment) and comment[0].startswith("--")
            text = " ".join(c for c in [comment[0].removeprefix("--").strip(), *comment[1:]] if c) if comment else ""
            found.append((match["key"], len(match["indent"]), text, marked))
        comment = []
    return found


def rows(values_text: str) -> list[tuple[str, Any, str, bool]]:
    """(dotted key, default, description, is a section heading) in the file's order."""
    values = yaml.load(values_text, Loader=yaml.CSafeLoader)
    out: list[tuple[str, Any, str, bool]] = []
    path: list[tuple[int, str]] = []
    inside: int | None = None  # the indentation of a `-- ` map being listed whole: its keys get no row
    entries = described(values_text.splitlines())
    for index, (key, indent, text, marked) in enumerate(entries):
        # a map written in flow style (`{a: 1}` on its key's line) has no key lines of its own: one value
        inline = index + 1 == len(entries) or entries[index + 1][1] <= indent
        if inside is not None and indent > inside:
            continue
        inside = None
        while path and path[-1][0] >= indent:
            path.pop()
        parents = [name for _, name in path]
        node: Any = values
        for name in [*parents, key]:
            node = node.get(name) if isinstance(node, dict) else None
        dotted = ".".join([*parents, key])
        if isinstance(node, dict) and node and not marked and not inline:
            if text:
                out.append((dotted, None, text, True))
        else:
            out.append((dotted, node, text, False))
            if isinstance(node, dict) and node:
                inside = indent
        path.append((indent, key))
    return out


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def readme() -> str:
    chart = yaml.load((CHART / "Chart.yaml").read_text(), Loader=yaml.CSafeLoader)
    head = HEAD.format(description=" ".join(chart["description"].split()), kube_version=chart["kubeVersion"])
    table = ["| Key | Default | Description |", "|---|---|---|"]
    for key, default, text, heading in rows((CHART / "values.yaml").read_text()):
        if heading:
            table.append(f"| **`{key}`** | | {cell(text)} |")
        else:
            shown = json.dumps(default, separators=(", ", ": "), ensure_ascii=False)
            table.append(f"| `{key}` | `{cell(shown)}` | {cell(text)} |")
    return head + "\n" + "\n".join(table) + "\n"


def main(argv: list[str]) -> int:
    target = CHART / "README.md"
    text = readme()
    if argv[1:] == ["--check"]:
        if not target.exists() or target.read_text() != text:
            print(
                f"{target.relative_to(ROOT)} is out of date: run scripts/chart-readme.py (make docs)", file=sys.stderr
            )
            return 1
        return 0
    target.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
