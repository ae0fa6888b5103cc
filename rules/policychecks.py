"""The checks of a policy document beyond its JSON Schema (rules/policy.schema.json): the API server's name, label
and toleration rules, load-affinity entries and requester names, with messages an operator reads. rules/policy.py
runs them beside the schema and drops the schema's message where one of these says the same thing better."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.kube.names import dns1123_label_error, dns1123_subdomain_error
from rules.kube.selectors import Problem, selector_problems
from rules.kube.tolerations import toleration_problems
from rules.loadaffinity.entries import load_affinity_problems
from rules.quoting import clip


def semantic_problems(doc: Mapping[str, Any]) -> list[Problem]:
    """What the policy schema cannot say, or says only as a raw pattern: names and label syntax as the API server
    checks them, selectors, load-affinity entries, tolerations and requesters, each worded for the operator."""
    problems: list[Problem] = []
    problems.extend(_namespace_problems(doc.get("excludedNamespaces"), "excludedNamespaces"))
    trust = doc.get("trust")
    if isinstance(trust, Mapping):
        problems.extend(_namespace_problems(trust.get("namespaces"), "trust.namespaces"))
        problems.extend(_requester_problems(trust.get("requesters"), "trust.requesters"))
    cdi = doc.get("cdi")
    if isinstance(cdi, Mapping):
        problems.extend(_requester_problems(cdi.get("requesters"), "cdi.requesters"))
    roles = doc.get("roles")
    if isinstance(roles, Mapping):
        for role, spec in roles.items():
            selectors = spec.get("selectors") if isinstance(spec, Mapping) else None
            if isinstance(selectors, list):
                for i, selector in enumerate(selectors):
                    problems.extend(selector_problems(selector, f"roles.{role}.selectors[{i}]"))
    if "loadAffinity" in doc:
        errors, unknown = load_affinity_problems(doc["loadAffinity"], "loadAffinity")
        problems.extend(errors + unknown)
    backup = doc.get("backupPVC")
    if isinstance(backup, Mapping):
        for source_class, spec in backup.items():
            at = f"backupPVC[{source_class}]"
            if (err := dns1123_subdomain_error(str(source_class))) is not None:
                problems.append((at, err))
            if isinstance(spec, Mapping):
                target = spec.get("storageClass")
                if isinstance(target, str) and target and (err := dns1123_subdomain_error(target)) is not None:
                    problems.append((f"{at}.storageClass", err))
    source = (doc.get("loadAffinitySource") or {}) if isinstance(doc.get("loadAffinitySource"), Mapping) else {}
    cm = source.get("configMap")
    if isinstance(cm, Mapping):
        for key, check in (("namespace", dns1123_label_error), ("name", dns1123_subdomain_error)):
            value = cm.get(key)
            if isinstance(value, str) and (err := check(value)) is not None:
                problems.append((f"loadAffinitySource.configMap.{key}", err))
    node_agent = doc.get("nodeAgent")
    namespace = node_agent.get("namespace") if isinstance(node_agent, Mapping) else None
    if isinstance(namespace, str) and namespace and (err := dns1123_label_error(namespace)) is not None:
        problems.append(("nodeAgent.namespace", err))
    tolerations = doc.get("tolerations")
    if isinstance(tolerations, list):
        for i, toleration in enumerate(tolerations):
            if isinstance(toleration, Mapping):
                problems.extend(toleration_problems(toleration, f"tolerations[{i}]"))
    return problems


def _namespace_problems(namespaces: Any, at: str) -> list[Problem]:
    if not isinstance(namespaces, list):
        return []
    return [
        (f"{at}[{i}]", err)
        for i, ns in enumerate(namespaces)
        if isinstance(ns, str) and (err := dns1123_label_error(ns)) is not None
    ]


SERVICE_ACCOUNT_USER = "system:serviceaccount:"


def _requester_problems(requesters: Any, at: str) -> list[Problem]:
    """A service account's user name must name a namespace and an account the API server could send."""
    if not isinstance(requesters, list):
        return []
    problems: list[Problem] = []
    for i, user in enumerate(requesters):
        if not isinstance(user, str):
            continue
        if not user or any(c.isspace() for c in user):
            problems.append((f"{at}[{i}]", f'"{clip(user)}" is not a user name (userInfo.username, no spaces)'))
            continue
        if not user.startswith(SERVICE_ACCOUNT_USER):
            continue
        namespace, _, name = user.removeprefix(SERVICE_ACCOUNT_USER).partition(":")
        err = dns1123_label_error(namespace) or dns1123_subdomain_error(name)
        if err is not None:
            problems.append(
                (f"{at}[{i}]", f"{clip(user)} is not system:serviceaccount:<namespace>:<name> with valid names: {err}")
            )
    return problems
