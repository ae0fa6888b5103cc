"""Linear scans of JSON bytes that tell when orjson's reading of a text may be used as it is.

orjson is the fast reader, but it differs from a strict reading in ways the bytes alone show: an integer past
64 bits becomes a float (ijl/orjson#473), a map keeps the last of a repeated key, and nesting is bounded only
at 1,024. Each scan is a few C-speed passes (`bytes.translate`, `count`, `replace`, a regex over digit runs),
never a Python loop over characters, and each is exact on a text orjson has read: in valid JSON, a `"` that
no backslash escapes opens or closes a string.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

#: orjson reads integers in [-2**63, 2**64 - 1] exactly; past them, a float.
_INT_MIN_DIGITS, _UINT_MAX_DIGITS = str(2**63).encode(), str(2**64 - 1).encode()
#: An integer token of 19 digits or more: not inside a longer number, not a fraction's or an exponent's digits.
_INTEGER_TOKEN = re.compile(rb"(?<![\d.eE+\-])(-?)(\d{19,})(?![\d.eE])")
#: Every digit becomes "0" and every other byte " ": a run of 19 digits is then a plain substring search.
_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_DIGITS = b"0" * 19
#: `\\ud800`-`\\udfff` escapes: the only way a lone surrogate enters a JSON text written in UTF-8.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_ESCAPED_COLON = re.compile(rb"\\u003[aA]")
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b'"[]{}')
#: Braces become brackets: in a valid text every pair matches, so one kind of pair measures the depth.
_ONE_BRACKET = bytes.maketrans(b"{}", b"[]")


def _plain_quotes(data: bytes) -> bytes:
    """The text, the same length, with every escaped backslash and escaped quote blanked: each `"` left opens or
    closes a string (outside strings, a valid text has no backslash)."""
    if b"\\" not in data:
        return data
    return data.replace(b"\\\\", b"  ").replace(b'\\"', b"  ")


def has_big_integer(data: bytes) -> bool:
    """Whether a valid JSON text has an integer token past 64 bits, which orjson would read as a float. A run
    of 19 digits is searched first (one translate and one find); only then are the strings dropped and the
    integer tokens of 19 digits or more (not a fraction's or an exponent's digits) compared with the bounds,
    as digit strings of the same length compare."""
    if _LONG_DIGITS not in data.translate(_DIGITS):
        return False
    outside = b"".join(_plain_quotes(data).split(b'"')[::2]) if b'"' in data else data
    for sign, digits in _INTEGER_TOKEN.findall(outside):
        bound = _INT_MIN_DIGITS if sign else _UINT_MAX_DIGITS
        if len(digits) > len(bound) or (len(digits) == len(bound) and digits > bound):
            return True
    return False


def has_surrogate_escape(data: bytes) -> bool:
    """Whether a JSON text may hold a lone surrogate: a `\\ud8`-`\\udf` escape, in either case."""
    return _SURROGATE_ESCAPE.search(data) is not None


def repeats_a_key(data: bytes, value: Any) -> bool | None:
    """Whether the JSON text `data`, which orjson read as `value`, repeats a key in a map (orjson keeps the last
    one silently); None when the count cannot tell (a `\\u003a` escape). Every colon of the text is a key's or
    is inside a string; orjson writes every key of `value` with one colon and every string with the colons it
    holds, unescaped. The text has more colons exactly when it had more keys."""
    if _ESCAPED_COLON.search(data):
        return None
    return data.count(b":") != orjson.dumps(value).count(b":")


def depth_over(data: bytes, limit: int) -> bool:
    """Whether a valid JSON text nests collections more than `limit` deep. Quotes and brackets alone are kept,
    the strings among them dropped, then innermost pairs removed level by level: at most `limit` passes, each
    linear and over the brackets only (a small part of a Kubernetes object's text)."""
    kept = _plain_quotes(data).translate(_ONE_BRACKET, _NOT_BRACKETS).replace(b'""', b"")
    if b'"' in kept:  # strings holding brackets (removing `""` above only joined strings, never took a bracket out)
        kept = b"".join(kept.split(b'"')[::2])
    for _ in range(limit):
        if not kept:
            return False
        kept = kept.replace(b"[]", b"")  # one level a pass: a pair this joins waits for the next
    return bool(kept)
