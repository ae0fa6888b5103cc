"""What every answer to a mutated review must be, whatever the review: one judgement for the in-process and the
over-TLS structural fuzz.

A broken review is the client's fault, so it gets 400 with a plain-text line naming the field or the problem, or
a well-formed AdmissionReview answer. Never a 5xx, never a rule that crashed (the pipeline turns a crash into an
"internal error in ..." warning or failure, which the answer and the log would show), never JSON that only
Python reads (NaN, Infinity), never a terminal escape or a bidi override carried from the input into a message a
person reads.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import traceback
from pathlib import Path
from typing import Any

from tests.hardening.hostile import ECHO_BOUND
from tests.support import ROOT
from tests.webhook.review_checks import check_response

INTERNAL = "internal error"
#: C0, DEL, C1, and the bidi embeddings, overrides and isolates that reorder what a terminal shows.
UNSAFE_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: A 400 names what was wrong: the request or one of its fields, the body, or its encoding.
NAMES_THE_PROBLEM = re.compile(r"\brequest\b|request\.[A-Za-z]|AdmissionReview|JSON|UTF-8")


class FuzzFailure(AssertionError):
    """A property broken; `kind` is a short stable name for it, so failures can be told apart and counted."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


def _strict_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def strict_json(data: bytes | str) -> Any:
    """JSON as every other client reads it: NaN and Infinity are syntax errors."""
    return json.loads(data, parse_constant=_strict_constant)


def _lenient_int(text: str) -> Any:
    return int(text) if len(text) < 4000 else text


def _unsafe(text: str) -> str | None:
    found = UNSAFE_CHARS.search(text)
    return None if found is None else repr(found.group())


def judge(sent: bytes, endpoint: str, status: int, content_type: str, body: bytes, *, max_body: int) -> None:
    """Raise FuzzFailure unless the answer to `sent` is one a mutated review may get."""
    if status >= 500:
        raise FuzzFailure(f"HTTP {status}", body[:300].decode("utf-8", "replace"))
    if status == 413:
        if len(sent) <= max_body:
            raise FuzzFailure("413 under the limit", f"{len(sent)} bytes")
        return
    if status != 200:
        _judge_error(status, content_type, body)
        return
    if not content_type.startswith("application/json"):
        raise FuzzFailure("200 not JSON", content_type)
    try:
        answer = strict_json(body)
    except ValueError as exc:
        raise FuzzFailure("response is not strict JSON", f"{exc}: {body[:300]!r}") from None
    review = json.loads(sent, parse_int=_lenient_int)
    try:
        check_response(review, answer, mutating=endpoint == "mutate")
    except AssertionError as exc:
        raise FuzzFailure("answer kube-apiserver refuses", str(exc)[:300]) from None
    response = answer["response"]
    if "patch" in response:
        try:
            strict_json(base64.b64decode(response["patch"]))
        except ValueError as exc:
            raise FuzzFailure("patch is not strict JSON", str(exc)) from None
    message = (response.get("status") or {}).get("message", "")
    texts = [("status.message", message), *(("warning", w) for w in response.get("warnings", []))]
    texts += [(f"auditAnnotations[{k}]", v) for k, v in (response.get("auditAnnotations") or {}).items()]
    for where, text in texts:
        if INTERNAL in text:
            raise FuzzFailure("rule exception", f"{where}: {text[:200]}")
        bad = _unsafe(text)
        if bad:
            raise FuzzFailure(f"raw {bad} in {where.split('[')[0]}", text[:200])
    if len(message) > ECHO_BOUND:
        raise FuzzFailure("denial echoes the input", f"{len(message)} characters")


def _judge_error(status: int, content_type: str, body: bytes) -> None:
    if status != 400:
        raise FuzzFailure(f"HTTP {status}", body[:300].decode("utf-8", "replace"))
    if not content_type.startswith("text/plain"):
        raise FuzzFailure("400 not plain text", content_type)
    text = body.decode("utf-8")
    line = text.removesuffix("\n")
    if not line or "\n" in line:
        raise FuzzFailure("400 not one line", repr(text[:300]))
    if not NAMES_THE_PROBLEM.search(line):
        raise FuzzFailure("400 names no field", line[:300])
    bad = _unsafe(line)
    if bad:
        raise FuzzFailure(f"raw {bad} in a 400", line[:200])
    if len(body) > ECHO_BOUND:
        raise FuzzFailure("400 echoes the input", f"{len(body)} bytes")


class ErrorLog(logging.Handler):
    """Every record at ERROR or above, from any logger, while installed: a rule's crash is logged here even
    when its answer looks fine."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> str | None:
        """The first record since the last call, with the exception and where it was raised; None if none."""
        records, self.records = self.records, []
        if not records:
            return None
        record = records[0]
        text = f"{record.name}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            frame = traceback.extract_tb(record.exc_info[2])[-1]
            path = Path(frame.filename)
            where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{frame.lineno}"
            text += f" ({type(record.exc_info[1]).__name__} at {where}: {str(record.exc_info[1])[:120]})"
        return text
