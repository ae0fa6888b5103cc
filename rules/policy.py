"""The policy: parsed from a bare YAML document or a ConfigMap (key `policy.yaml`), validated completely.

Every field is optional; missing fields take the embedded default's value. Validation reports every problem with
its path and never stops at the first, so one `kubectl apply` shows an operator everything to fix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from typing import Any

import jsonschema

from rules.kube.disclosed import disclosed_keys
from rules.kube.selectors import Problem, type_name
from rules.model import Json
from rules.policychecks import semantic_problems
from rules.quoting import clip, field_path, one_of, path_parts
from rules.safeload import DocumentError, load_documents
from rules.suggest import unknown_field

POLICY_KEY = "policy.yaml"
POLICY_LABEL = "storage-affinity.io/policy"
ROLES = ("mover", "backup", "restore")
#: A policy is a few KiB; PyYAML (pure Python: the C loader crashes on deep nesting) needs seconds per MiB, which
#: would hold an admission request (a policy ConfigMap through /validate) past its timeout.
POLICY_TEXT_LIMIT = 256 * 1024
#: How many problems a PolicyError's text lists (all stay in `problems`).
LISTED_PROBLEMS = 50

_MISSING = re.compile(r"^'(.+)' is a required property$")


def is_policy_config_map(config_map: Mapping[str, Any]) -> bool:
    """Whether a ConfigMap is labelled as a policy (`storage-affinity.io/policy: "true"`): what the webhook
    loads, reloads and validates, and `review --live` reads."""
    labels = (config_map.get("metadata") or {}).get("labels") or {}
    return isinstance(labels, Mapping) and labels.get(POLICY_LABEL) == "true"


class PolicyError(ValueError):
    """The policy is invalid; `problems` holds every (path, message)."""

    def __init__(self, problems: list[Problem], source: str = "policy") -> None:
        self.problems = problems
        self.source = source
        listed = "; ".join(format_problem(p) for p in problems[:LISTED_PROBLEMS])
        more = f"; and {len(problems) - LISTED_PROBLEMS} more" if len(problems) > LISTED_PROBLEMS else ""
        super().__init__(f"{source}: {listed}{more}")


@dataclass(frozen=True)
class Policy:
    """The policy in effect, parsed and validated (docs/policy.md has every field). Frozen: the server swaps a
    whole new Policy in on a change, so a review in flight always sees one consistent policy."""

    enforcement: str = "deny"
    on_lookup_failure: str = "allow"
    excluded_namespaces: frozenset[str] = frozenset()
    role_selectors: Mapping[str, tuple[Json, ...]] = field(default_factory=dict)
    placement: str = "requiredAffinity"
    copy_tolerations: bool = True
    read_write_once_pod: str = "deny"
    load_affinity: tuple[Json, ...] = ()
    backup_pvc: Mapping[str, Json] = field(default_factory=dict)
    restore_pvc: Mapping[str, Any] = field(default_factory=dict)
    tolerations: tuple[Json, ...] = ()
    load_affinity_source: tuple[str, str] | None = None
    family_enforcement: Mapping[str, str] = field(default_factory=dict)
    document: Json = field(default_factory=dict, compare=False)
    stuck_after: int = 120  # seconds a storage pod may be stuck before the audit names a cause
    failed_within: int = 3600  # seconds since a storage pod ended Failed during which the audit names its cause
    node_agent_mode: str = "require"
    node_agent_max_names: int = 100
    node_agent_namespace: str = ""
    data_source_scope: str = "roles"
    node_local_drivers: frozenset[str] = frozenset()
    zone_following_drivers: frozenset[str] = frozenset()
    cdi_follow_vm: bool = True
    #: `trust.namespaces`; None when unset: Velero's namespace alone.
    trust_namespaces: frozenset[str] | None = None
    trust_requesters: frozenset[str] = frozenset()
    cdi_requesters: frozenset[str] = frozenset()
    #: The answers' reader may read the Nodes (the `audit` command's operator); never set by a policy document.
    nodes_readable: bool = False

    def enforcement_for(self, family: str) -> str:
        return self.family_enforcement.get(family, self.enforcement)

    @property
    def velero_namespace(self) -> str:
        """Velero's namespace when no pod says it: `nodeAgent.namespace`, else that of Velero's node-agent ConfigMap
        the policy reads, else `velero`, where Velero installs by default."""
        if self.node_agent_namespace:
            return self.node_agent_namespace
        return self.load_affinity_source[0] if self.load_affinity_source else "velero"

    @cached_property
    def trusted_namespaces(self) -> frozenset[str]:
        """Where the roles that grant (backup, restore) are trusted: `trust.namespaces`, else Velero's namespace.
        Asked by every backup and restore review, so derived once per policy."""
        return self.trust_namespaces if self.trust_namespaces is not None else frozenset({self.velero_namespace})

    @cached_property
    def disclosed_node_labels(self) -> frozenset[str]:
        """The node label keys a pod's constraints are judged on (rules/kube/disclosed.py)."""
        return disclosed_keys(self.load_affinity, every=self.nodes_readable)


def format_problem(problem: Problem) -> str:
    path, message = problem
    return f"{path}: {message}" if path else message


@cache
def _schema() -> Json:
    return json.loads(resources.files("rules").joinpath("policy.schema.json").read_text())  # type: ignore[no-any-return]


def validation_families() -> tuple[str, ...]:
    """The finding families the policy can switch per family (`validation.<family>.enforcement`)."""
    return tuple(_schema()["properties"]["validation"]["properties"])


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(_schema())


@cache
def default_document() -> Json:
    text = resources.files("rules").joinpath("default_policy.yaml").read_text()
    doc = load_documents(text, "default policy")[0]
    assert isinstance(doc, dict)
    return doc


def default_policy() -> Policy:
    return _default_policy()


@cache
def _default_policy() -> Policy:
    return policy_from_document(default_document())


def policy_problems(doc: Any) -> list[Problem]:
    """Every problem of a policy document, schema and semantics, sorted by path."""
    if not isinstance(doc, Mapping):
        return [("", f"the policy must be a YAML mapping, not {type_name(doc)}")]
    semantic = semantic_problems(doc)
    problems = [
        p
        for error in _validator().iter_errors(doc)
        for p in _schema_problems(error)
        if not _restated(error, p[0], semantic)
    ]
    problems.extend(semantic)
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda p: p[0])


def policy_from_document(doc: Any, source: str = "policy") -> Policy:
    """A validated Policy from a bare policy document, defaults filled in."""
    problems = policy_problems(doc)
    if problems:
        raise PolicyError(problems, source)
    base = default_document()

    def section(name: str) -> dict[str, Any]:
        """A section of the document over the embedded default's, field by field."""
        return {**base[name], **(doc.get(name) or {})}

    roles = section("roles")
    co = section("coScheduling")
    # Only the document's own per-family settings override its `enforcement`: a family it leaves out follows its
    # `enforcement`, whatever another document says (docs/validation.md#enforcement).
    validation = doc.get("validation") or {}
    source_cm = (doc.get("loadAffinitySource") or {}).get("configMap")
    data_source = section("dataSource")
    node_agent = section("nodeAgent")
    trust = section("trust")
    cdi = section("cdi")
    return Policy(
        enforcement=doc.get("enforcement", base["enforcement"]),
        on_lookup_failure=doc.get("onLookupFailure", base["onLookupFailure"]),
        excluded_namespaces=frozenset(doc.get("excludedNamespaces", base["excludedNamespaces"])),
        role_selectors={role: tuple((roles.get(role) or {}).get("selectors") or ()) for role in ROLES},
        placement=co["placement"],
        copy_tolerations=co["copyTolerations"],
        read_write_once_pod=co["readWriteOncePod"],
        load_affinity=tuple(doc.get("loadAffinity", base["loadAffinity"])),
        backup_pvc=dict(doc.get("backupPVC", base["backupPVC"])),
        restore_pvc=dict(doc.get("restorePVC", base["restorePVC"])),
        tolerations=tuple(doc.get("tolerations", base["tolerations"])),
        load_affinity_source=(source_cm["namespace"], source_cm["name"]) if source_cm else None,
        family_enforcement={k: v["enforcement"] for k, v in validation.items() if "enforcement" in v},
        document=dict(doc),
        stuck_after=section("audit")["stuckAfterSeconds"],
        failed_within=section("audit")["failedWithinSeconds"],
        node_agent_mode=node_agent["mode"],
        node_agent_max_names=node_agent["maxNodeNames"],
        node_agent_namespace=node_agent["namespace"],
        data_source_scope=data_source["scope"],
        node_local_drivers=frozenset(data_source["nodeLocalDrivers"]),
        zone_following_drivers=frozenset(data_source["zoneFollowingDrivers"]),
        cdi_follow_vm=bool(cdi["followVM"]),
        trust_namespaces=frozenset(trust["namespaces"]) if trust.get("namespaces") is not None else None,
        trust_requesters=frozenset(trust["requesters"]),
        cdi_requesters=frozenset(cdi["requesters"]),
    )


def parse_policy_text(text: str, source: str = "policy") -> Policy:
    """A policy from YAML text holding either a bare policy document or a ConfigMap with `policy.yaml`."""
    if (too_big := _size_problem(text)) is not None:
        raise PolicyError([("", too_big)], source)
    try:
        documents = load_documents(text, source)
    except DocumentError as exc:  # its text starts with the source, which PolicyError adds again
        raise PolicyError([("", str(exc).removeprefix(f"{source}: "))], source) from None
    if len(documents) != 1:
        raise PolicyError([("", f"expected exactly one YAML document, found {len(documents)}")], source)
    doc = documents[0]
    if isinstance(doc, Mapping) and doc.get("kind") == "ConfigMap":
        return policy_from_config_map(doc, source)
    return policy_from_document(doc, source)


def policy_from_config_map(config_map: Mapping[str, Any], source: str = "policy ConfigMap") -> Policy:
    data = config_map.get("data") or {}
    if not isinstance(data, Mapping) or POLICY_KEY not in data:
        raise PolicyError([("data", f"the policy ConfigMap must hold the policy under key {POLICY_KEY!r}")], source)
    text = data[POLICY_KEY]
    if not isinstance(text, str):
        raise PolicyError([(f"data[{POLICY_KEY}]", f"must be a string, not {type_name(text)}")], source)
    if (too_big := _size_problem(text)) is not None:
        raise PolicyError([(f"data[{POLICY_KEY}]", too_big)], source)
    try:
        documents = load_documents(text, f"data[{POLICY_KEY}]")
    except DocumentError as exc:  # its text starts with the source, which the path already names
        message = str(exc).removeprefix(f"data[{POLICY_KEY}]: ")
        raise PolicyError([(f"data[{POLICY_KEY}]", message)], source) from None
    if len(documents) > 1:
        raise PolicyError([(f"data[{POLICY_KEY}]", "must hold exactly one YAML document")], source)
    doc = documents[0] if documents else {}
    try:
        return policy_from_document(doc, source)
    except PolicyError as exc:
        raise PolicyError([(_join(f"data[{POLICY_KEY}]", p), m) for p, m in exc.problems], source) from None


def _size_problem(text: str) -> str | None:
    if len(text) <= POLICY_TEXT_LIMIT:
        return None
    return f"is {len(text)} characters long, more than the limit of {POLICY_TEXT_LIMIT} (a policy is a few KiB)"


def _join(prefix: str, path: str) -> str:
    if not path or not prefix:
        return prefix or path
    return prefix + (path if path.startswith("[") else "." + path)


def _schema_problems(error: jsonschema.ValidationError) -> list[Problem]:
    path = field_path(error.absolute_path)
    validator = error.validator
    if validator == "enum":
        shown = clip(json.dumps(error.instance) if not isinstance(error.instance, str) else f'"{error.instance}"')
        return [(path, f"{shown} is not one of {one_of(error.validator_value)}")]  # type: ignore[arg-type]
    if validator == "additionalProperties":
        known = list((error.schema.get("properties") or {}).keys())  # type: ignore[union-attr]
        instance = error.instance if isinstance(error.instance, Mapping) else {}
        return [(field_path([k], path), unknown_field(k, known)) for k in instance if k not in known]
    if validator == "type":
        expected = {
            "array": "a list",
            "object": "a mapping",
            "string": "a string",
            "boolean": "true or false",
            "integer": "an integer",
        }.get(str(error.validator_value), str(error.validator_value))
        return [(path, f"must be {expected}, not {type_name(error.instance)}")]
    if validator == "required":
        return [(path, error.message.replace("'", '"'))]
    return [(path, error.message)]


#: The schema's rules about a value that a worded check may also state: these give way to a worded problem on the
#: same field or inside it. A missing field gives way only to a worded problem about that very field; an unknown
#: field or a wrong type is always reported, whatever else is wrong.
_VALUE_RULES = frozenset(
    {"pattern", "minLength", "maxLength", "enum", "const", "propertyNames", "minProperties", "maxProperties",
     "minItems", "maxItems", "minimum", "maximum", "not", "anyOf", "oneOf", "allOf", "if", "then", "else"}
)  # fmt: skip


def _restated(error: jsonschema.ValidationError, path: str, semantic: list[Problem]) -> bool:
    """Whether a worded check already reports what this schema error says (see _VALUE_RULES)."""
    if error.validator == "required":
        missing = _MISSING.match(error.message)
        wanted = path_parts(field_path([missing[1]], path)) if missing else None
        return any(path_parts(at) == wanted for at, _ in semantic)
    return error.validator in _VALUE_RULES and _said_better(path, semantic)


def _said_better(path: str, semantic: list[Problem]) -> bool:
    """Whether the semantic checks report on the field at `path` (or inside it): the schema holds the same rules
    (the chart's values schema is generated from it) but words them as raw patterns, so its message is dropped."""
    parts = path_parts(path)
    return bool(parts) and any(path_parts(at)[: len(parts)] == parts for at, _ in semantic)
