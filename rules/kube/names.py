"""Kubernetes name and label syntax, as apimachinery validates it.

Kept exact so that what we accept is what the API server accepts: a value we let through that the API server
later rejects would surface as an opaque failure far from its cause.
"""

from __future__ import annotations

import functools
import re

from rules.quoting import clip

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def dns1123_label_error(value: str) -> str | None:
    """Why `value` is not a DNS-1123 label (namespace names), or None."""
    return _name_error(value, 63, _DNS1123_LABEL, "a DNS-1123 label (lower case alphanumerics and '-'")


def dns1123_subdomain_error(value: str) -> str | None:
    """Why `value` is not a DNS-1123 subdomain (names of most objects), or None."""
    return _name_error(value, 253, _DNS1123_SUBDOMAIN, "a valid name (lower case alphanumerics, '-' and '.'")


def _name_error(value: str, longest: int, pattern: re.Pattern[str], what: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > longest:
        return f"{clip(value)!r} is longer than {longest} characters"
    if not pattern.fullmatch(value):
        return f"{clip(value)!r} is not {what}, alphanumeric at both ends)"
    return None


_CACHED_UP_TO = 320  # longer than any valid key or value: such input is not remembered


def label_key_error(key: str) -> str | None:
    """Why `key` is not a valid label key (an optional DNS subdomain prefix, '/', a qualified name), or None.

    Remembered for short input: the same keys and values are checked on every admitted pod.
    """
    return _cached_label_key_error(key) if len(key) <= _CACHED_UP_TO else _label_key_error(key)


def label_value_error(value: str) -> str | None:
    """Why `value` is not a valid label value (empty is valid), or None."""
    return _cached_label_value_error(value) if len(value) <= _CACHED_UP_TO else _label_value_error(value)


def _label_key_error(key: str) -> str | None:
    if not key:
        return "label key must not be empty"
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return f"label key {clip(key)!r} has an empty prefix"
        if len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            return f"label key {clip(key)!r} has a prefix that is not a DNS-1123 subdomain"
    if not name:
        return f"label key {clip(key)!r} has an empty name"
    if len(name) > 63:
        return f"label key {clip(key)!r} has a name longer than 63 characters"
    if not _QUALIFIED_NAME.fullmatch(name):
        return (
            f"label key {clip(key)!r} is not a qualified name "
            "(alphanumerics, '-', '_' and '.', alphanumeric at both ends)"
        )
    return None


def _label_value_error(value: str) -> str | None:
    if len(value) > 63:
        return f"label value {clip(value)!r} is longer than 63 characters"
    if not _LABEL_VALUE.fullmatch(value):
        return f"label value {clip(value)!r} is not valid (alphanumerics, '-', '_' and '.', alphanumeric at both ends)"
    return None


_cached_label_key_error = functools.lru_cache(maxsize=4096)(_label_key_error)
_cached_label_value_error = functools.lru_cache(maxsize=4096)(_label_value_error)
