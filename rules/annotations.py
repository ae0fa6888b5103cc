"""The project's own annotations (`storage-affinity.io/*`): names, values and JSON, checked before any rule
relies on them, so a typo is an admission error instead of a silently ignored setting."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rules.budget import OverBudget, check_entries
from rules.kube.names import dns1123_subdomain_error
from rules.loadaffinity.entries import load_affinity_problems
from rules.model import PREFIX
from rules.quoting import clip, one_of
from rules.safeload import JsonError, load_json
from rules.suggest import unknown_field

ROLE = PREFIX + "role"
PLACEMENT = PREFIX + "placement"
CO_SCHEDULE_WITH = PREFIX + "co-schedule-with"
LOAD_AFFINITY = PREFIX + "load-affinity"
STORAGE_CLASS = PREFIX + "storage-class"
CO_SCHEDULED_WITH = PREFIX + "co-scheduled-with"
LOAD_AFFINITY_APPLIED = PREFIX + "load-affinity-applied"
NODE_AGENT_RESTRICTED = PREFIX + "node-agent-restricted"
DATA_SOURCE_PLACED = PREFIX + "data-source-placed"
FOLLOWS_VM = PREFIX + "follows-vm"

PLACEMENTS = ("requiredAffinity", "nodeSelector", "nodeName")


def _one_of(*allowed: str) -> Callable[[str], list[tuple[str, str]]]:
    def check(value: str) -> list[tuple[str, str]]:
        return [] if value in allowed else [("", f'"{clip(value)}" is not one of {one_of(allowed)}')]

    return check


def _name(value: str) -> list[tuple[str, str]]:
    err = dns1123_subdomain_error(value)
    return [("", err)] if err else []


def _decision(value: str) -> list[tuple[str, str]]:
    pod, slash, node = value.partition("/")
    if not slash or dns1123_subdomain_error(pod) or dns1123_subdomain_error(node):
        return [("", f'"{clip(value)}" is not of the form <pod>/<node>')]
    return []


def _applied(value: str) -> list[tuple[str, str]]:
    return [] if value == "*" else _name(value)


def _restricted(value: str) -> list[tuple[str, str]]:
    how, _, count = value.partition(" ")
    if how in ("In", "NotIn") and count.isdigit() and count.isascii():
        return []
    return [("", f'"{clip(value)}" is not of the form "In <nodes>" or "NotIn <nodes>"')]


def _load_affinity(value: str) -> list[tuple[str, str]]:
    try:
        entries = load_json(value)
    except JsonError as exc:
        return [("", f"is not valid JSON: {exc}")]
    check_entries(entries, "")
    errors, unknown = load_affinity_problems(entries, "")
    return errors + unknown


def _placed(value: str) -> list[tuple[str, str]]:
    """`<claim>=<node>`, `<claim>=pv/<PV>` or `<claim>=vsc/<content>` items, comma-separated: where each data
    source put the pod."""
    for item in value.split(","):
        claim, equals, place = item.partition("=")
        place = place.removeprefix("pv/").removeprefix("vsc/")
        if not equals or dns1123_subdomain_error(claim) or dns1123_subdomain_error(place):
            return [("", f'"{clip(value)}" is not of the form <claim>=<node>[,<claim>=pv/<PV>|vsc/<content>...]')]
    return []


def _names(value: str) -> list[tuple[str, str]]:
    return next((found for item in value.split(",") if (found := _name(item))), [])


CHECKS: Mapping[str, Callable[[str], list[tuple[str, str]]]] = {
    ROLE: _one_of("none", "mover", "backup", "restore"),
    PLACEMENT: _one_of(*PLACEMENTS),
    CO_SCHEDULE_WITH: _name,
    LOAD_AFFINITY: _load_affinity,
    STORAGE_CLASS: _name,
    CO_SCHEDULED_WITH: _decision,
    LOAD_AFFINITY_APPLIED: _applied,
    NODE_AGENT_RESTRICTED: _restricted,
    DATA_SOURCE_PLACED: _placed,
    FOLLOWS_VM: _names,
}


def key_problems(key: Any, value: Any, base: str = "metadata.annotations") -> list[tuple[str, str]]:
    """(field, message) for one annotation: none unless it is a `storage-affinity.io/` key, unknown or badly
    valued."""
    if not isinstance(key, str) or not key.startswith(PREFIX):
        return []
    at = f"{base}[{key}]"
    check = CHECKS.get(key)
    if check is None:
        known = [k[len(PREFIX) :] for k in CHECKS]
        return [(at, unknown_field(key[len(PREFIX) :], known).replace("field", "annotation", 1))]
    try:
        found = check(str(value))
    except OverBudget as exc:
        raise OverBudget(str(exc), at + exc.field) from None
    return [(at + sub, message) for sub, message in found]
