"""JUnit XML for `test -o junit`: the report CI systems (GitLab, Jenkins, GitHub's test reporters) show per case.

One <testsuite> per suite file, one <testcase> per case with a <failure> holding each failed expectation; a suite
that is bad is an <error>. Text from a suite or a result may hold characters XML 1.0 cannot carry (control
characters); they are written as `\\uXXXX` so that the report always parses."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Protocol

#: What XML 1.0 cannot carry, even escaped: C0 controls other than tab, newline and carriage return, surrogates,
#: U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class JUnitCase(Protocol):
    suite: str
    case: str

    @property
    def failure_lines(self) -> list[str]: ...


def _text(value: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", value)


def junit_report(results: Sequence[JUnitCase], problems: Sequence[str]) -> str:
    """The cases and the suites' problems as a JUnit XML document."""
    root = ET.Element("testsuites", name="storage-affinity-webhook test")
    suites: dict[str, ET.Element] = {}
    for result in results:
        if result.suite not in suites:
            suites[result.suite] = ET.SubElement(root, "testsuite", name=_text(result.suite))
        case = ET.SubElement(suites[result.suite], "testcase", classname=_text(result.suite), name=_text(result.case))
        if lines := result.failure_lines:
            failure = ET.SubElement(case, "failure", message=_text(lines[0]), type="expectation")
            failure.text = _text("\n".join(lines))
    if problems:
        bad = ET.SubElement(root, "testsuite", name="suite problems")
        for index, problem in enumerate(problems):
            case = ET.SubElement(bad, "testcase", classname="suite problems", name=f"problem {index + 1}")
            ET.SubElement(case, "error", message=_text(problem), type="suite").text = _text(problem)
    for element in [root, *root]:
        cases = element.iter("testcase")
        counted = [(c.find("failure") is not None, c.find("error") is not None) for c in cases]
        element.set("tests", str(len(counted)))
        element.set("failures", str(sum(f for f, _ in counted)))
        element.set("errors", str(sum(e for _, e in counted)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
