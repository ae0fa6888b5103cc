"""What `audit` prints: the run as JSON or YAML, or a table sized to the terminal (wrapped, or a block per finding
when narrower than its narrowest form), `-o wide` never wrapped."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from typing import TextIO

import yaml

from rules.audit import ObjectAudit
from rules.messages import counted
from webhook.audit.command import AuditRun


def render(run: AuditRun, output: str, width: int | None = None) -> str:
    """The run as `output`; a table's long columns wrap to `width` (None: a finding a line), `wide` never wraps."""
    if output == "json":
        return json.dumps(run.as_json(), indent=2)
    if output == "yaml":
        return yaml.safe_dump(run.as_json(), sort_keys=False, allow_unicode=False).rstrip()
    if output == "wide":
        return render_table(run, wide=True)
    return render_table(run, width)


COLUMNS = ("OBJECT", "ROLE", "NODE", "PLACEMENT", "CAUSE", "FAMILY", "SEVERITY", "FIELD", "MESSAGE")
#: `-o wide` adds the pod's phase and, for a stuck storage pod, the remedy of its cause.
WIDE_COLUMNS = (
    "OBJECT", "ROLE", "PHASE", "NODE", "PLACEMENT", "CAUSE", "FAMILY", "SEVERITY", "FIELD", "MESSAGE", "REMEDY",
)  # fmt: skip
#: The columns that wrap on a narrow terminal, in the order they give up room, and the narrowest each gets (or its
#: longest word in PLACEMENT and MESSAGE, so that a node name stays on one line); the others, NODE above all, stay
#: whole.
WRAPPED = {"OBJECT": 24, "PLACEMENT": 16, "FIELD": 24, "MESSAGE": 40}


def shown_placement(report: ObjectAudit) -> str:
    """The PLACEMENT cell: `stuck` for a pod with a cause and `blocked` for one with a deny finding, whatever its
    node says, so that no row reads `ok` beside a finding that the pod cannot start or would be refused."""
    if report.cause is not None:
        return "stuck"
    if report.placement and any(finding.severity == "deny" for finding in report.findings):
        return "blocked"
    return report.placement


def render_table(run: AuditRun, width: int | None = None, *, wide: bool = False) -> str:
    """One row a finding, Multi-Attach movers first, then by namespace, kind and name; a summary line last. The
    CAUSE column names why a stuck storage pod is stuck (its JSON `cause` has the message and the remedy). With a
    `width`, the long columns wrap onto more lines so that the row fits it, and below the narrowest table (the
    WRAPPED minimums) each finding is a block of `key: value` lines (`_block`); nothing is ever cut."""
    columns = WIDE_COLUMNS if wide else COLUMNS
    rows: list[tuple[str, ...]] = []
    for report in run.reports:
        name = f"{report.kind.lower()}/{report.namespace + '/' if report.namespace else ''}{report.name}"
        if report.multi_attach:
            name = f"{name} (MULTI-ATTACH)"
        for finding in report.findings:
            placement = shown_placement(report) + (f" → {report.wanted}" if report.wanted else "")
            cause = report.cause.code if report.cause is not None else "-"
            where = (name, report.role or "-", *([report.phase or "-"] if wide else []), report.node or "-")
            row = (*where, placement or "-", cause, finding.family, finding.severity, finding.field or "-")
            if wide:
                remedy = report.cause.remedy if report.cause is not None else "-"
                rows.append((*row, finding.message, remedy))
            else:
                rows.append((*row, finding.message))
    summary = run.summary()
    judged = f"; policy: {run.policy}" if run.policy else ""
    if not rows:
        return f"{counted(summary['audited'], 'object')} audited: no findings{judged}"
    line = (
        f"{counted(summary['audited'], 'object')} audited: {counted(summary['findings'], 'finding')} in "
        f"{counted(summary['objectsWithFindings'], 'object')}, {summary['multiAttach']} Multi-Attach (movers stuck "
        f"on a claim held elsewhere), {counted(summary['stuck'], 'stuck storage pod')}"
        + (f", {counted(summary['failed'], 'storage pod')} ended Failed" if summary["failed"] else "")
        + judged
    )
    widths = [max(len(r[i]) for r in [columns, *rows]) for i in range(len(columns))]
    if width is not None and not wide:
        widths = _fitted(columns, rows, widths, width)
        if sum(widths) + 2 * (len(widths) - 1) > width:
            return "\n\n".join([*(_block(columns, row, width) for row in rows), "\n".join(_wrapped(line, width))])
    lines: list[str] = []
    for row in [columns, *rows]:
        cells = [_wrapped(cell, w) for cell, w in zip(row, widths, strict=True)]
        for i in range(max(len(c) for c in cells)):
            parts = [c[i] if i < len(c) else "" for c in cells]
            lines.append("  ".join(p.ljust(w) for p, w in zip(parts, widths, strict=True)).rstrip())
    return "\n".join([*lines, "", line])


def _block(columns: tuple[str, ...], row: tuple[str, ...], width: int) -> str:
    """A finding as `OBJECT name` then an indented `key: value` line a column, for a terminal narrower than the
    narrowest table: each value wraps (`_wrapped`) under its first line, so that no line is wider than `width`
    unless a single word is."""
    keys = [f"{column.lower()}:" for column in columns[1:]]
    indent = 2 + max(len(key) for key in keys) + 1
    lines = [f"{columns[0]} {row[0]}"]
    for key, value in zip(keys, row[1:], strict=True):
        wrapped = _wrapped(value, max(width - indent, WRAPPED["OBJECT"]))
        lines.append(f"  {key.ljust(indent - 3)} {wrapped[0]}")
        lines += [" " * indent + part for part in wrapped[1:]]
    return "\n".join(lines)


def _fitted(columns: tuple[str, ...], rows: list[tuple[str, ...]], widths: list[int], width: int) -> list[int]:
    """Column widths whose rows fit `width`: OBJECT, PLACEMENT and FIELD give up room first, the widest a character
    at a time, then MESSAGE; none below its minimum (narrower than that, `render_table` prints blocks)."""
    fitted = list(widths)
    floor = {
        i: max([WRAPPED[c], *(len(word) for r in rows for word in r[i].split() if c in ("PLACEMENT", "MESSAGE"))])
        for i, c in enumerate(columns)
        if c in WRAPPED
    }
    excess = sum(fitted) + 2 * (len(fitted) - 1) - width
    for group in ([i for i in floor if columns[i] != "MESSAGE"], [i for i in floor if columns[i] == "MESSAGE"]):
        while excess > 0 and (narrowable := [i for i in group if fitted[i] > floor[i]]):
            widest = max(narrowable, key=lambda i: fitted[i])
            fitted[widest] -= 1
            excess -= 1
    return fitted


def _wrapped(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width`, broken at spaces, and a longer word (a field path) after a `.` or `/`
    where it can: wrapped, never cut."""
    lines: list[str] = []
    for wrapped in textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [text]:
        rest = wrapped
        while len(rest) > width:
            at = max(rest.rfind(".", 0, width), rest.rfind("/", 0, width)) + 1
            at = at if at > 0 else width
            lines.append(rest[:at])
            rest = rest[at:]
        lines.append(rest)
    return lines


def default_output(stream: TextIO) -> str:
    return "table" if stream.isatty() else "json"


def table_width(stream: TextIO) -> int | None:
    """The width a table wraps to: on a terminal, its width ($COLUMNS first, as `shutil` reads it); elsewhere
    $COLUMNS when set, else None, so that a table written to a file or a pipe keeps a finding a line."""
    if stream.isatty():
        return shutil.get_terminal_size().columns
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:  # unset, empty, or not a number (`²` passes isdigit() yet is no int)
        return None
    return columns if columns > 0 else None
