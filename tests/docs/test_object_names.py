"""Every object a `kubectl` or `helm` command in README.md and docs/ names is one the chart creates under that name.

The commands (```console blocks and inline `kubectl ...` spans, with the page's `NS=...`/`NAME=...` variables
expanded) are read for the objects they name: `deployment/NAME`, `get secret NAME`, `-n NAMESPACE`,
`--as=system:serviceaccount:NS:NAME`, `get --raw .../namespaces/NS/services/https:NAME:443/...`, `-l key=value` on
the server's pods. Each is looked up in what `helm template` renders for the docs' own `helm install`/`helm upgrade`
commands (and the Secrets those objects refer to). Objects of other kinds (pods by name, nodes, Velero's) and
upper-case placeholders (`POD`) are not the chart's and are skipped; a `$VAR` the page does not define is a
problem, as it would otherwise pass for such a placeholder and its name go unchecked.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from testkit import yamldocs
from tests.docs.test_commands import PAGES, Command, _env, _helm_words, commands
from tests.support import ROOT

_INLINE = re.compile(r"`((?:kubectl|helm) [^`]+)`")
_VARIABLE = re.compile(r"\$\{?([A-Z_]+)\}?")
_RAW_SERVICE = re.compile(r"/namespaces/(?P<ns>[^/]+)/services/(?:https?:)?(?P<name>[^/:]+)(?::[^/]*)?/")
_SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<"}
_ALIASES = {
    "svc": "service",
    "cm": "configmap",
    "sa": "serviceaccount",
    "deploy": "deployment",
    "po": "pod",
    "ns": "namespace",
}
#: Namespaces of other software the docs send commands to, with why.
OTHER_NAMESPACES = {"velero": "Velero's namespace, where its node-agent DaemonSet runs"}
#: Kinds the chart renders or that its objects name (the Secret of the serving certificate).
CHART_KINDS = {
    "deployment", "service", "serviceaccount", "secret", "configmap", "certificate", "issuer", "lease", "role",
    "rolebinding", "clusterrole", "clusterrolebinding", "mutatingwebhookconfiguration",
    "validatingwebhookconfiguration", "servicemonitor", "prometheusrule", "poddisruptionbudget",
    "horizontalpodautoscaler",
}  # fmt: skip


@dataclass(frozen=True)
class Ref:
    """One object a command names: kind (singular, lower case), namespace ("" for cluster-scoped), name."""

    kind: str
    namespace: str
    name: str


def _kind(word: str) -> str:
    word = word.lower().split(".")[0]  # deployments.apps
    word = _ALIASES.get(word, word)
    for plural, singular in (("ies", "y"), ("ses", "s"), ("s", "")):
        if word.endswith(plural) and word.removesuffix(plural) + singular in CHART_KINDS | {"pod", "namespace"}:
            return word.removesuffix(plural) + singular
    return word


def page_commands(page: Path) -> Iterator[tuple[Command, list[str]]]:
    """The page's kubectl and helm commands as words, variables expanded and cut at the first shell operator."""
    shown = commands(page)
    variables = dict(
        c.words[0].split("=", 1) for c in shown if len(c.words) == 1 and re.fullmatch(r"[A-Z_]+=\S+", c.words[0])
    )
    inline = [Command(page, match[1], 0) for match in _INLINE.finditer(page.read_text())]
    for command in [*shown, *inline]:
        try:
            words = shlex.split(command.line, comments=True)
        except ValueError:  # an inline span that is only part of a command
            continue
        if not words or words[0] not in ("kubectl", "helm"):
            continue
        cut = next((i for i, w in enumerate(words) if w in _SHELL_OPERATORS), len(words))
        yield command, [_VARIABLE.sub(lambda m: variables.get(m[1], m[0]), w) for w in words[:cut]]


def _option(words: list[str], *names: str) -> str | None:
    for i, word in enumerate(words):
        for name in names:
            if word == name and i + 1 < len(words):
                return words[i + 1]
            if word.startswith(f"{name}="):
                return word.split("=", 1)[1]
    return None


_VALUED = {"-n", "--namespace", "-o", "--output", "-l", "--selector", "--as", "--since", "-c", "--container", "-f"}


def _positionals(words: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _VALUED:
            skip = True
        elif not word.startswith("-"):
            out.append(word)
    return out


def kubectl_refs(words: list[str]) -> tuple[list[Ref], list[tuple[str, str]], str | None]:
    """(objects named, label selectors on the release's pods as (namespace, selector), namespace given)."""
    namespace = _option(words, "-n", "--namespace")
    refs: list[Ref] = []
    labels: list[tuple[str, str]] = []
    args = _positionals(words[1:])
    verb = args[0] if args else ""
    rest = args[1:]
    if verb == "rollout":
        rest = rest[1:]
    elif verb == "auth":
        rest = rest[2:]  # can-i VERB
    if verb == "get" and (raw := _option(words, "--raw")):
        if found := _RAW_SERVICE.search(raw):
            refs.append(Ref("service", found["ns"], found["name"]))
        rest = []
    if (who := _option(words, "--as")) and who.startswith("system:serviceaccount:"):
        sa_namespace, _, sa_name = who.removeprefix("system:serviceaccount:").partition(":")
        refs.append(Ref("serviceaccount", sa_namespace, sa_name))
    if verb in ("apply", "port-forward", "top") or not rest:
        rest = [] if verb != "top" else rest
    if rest and "/" not in rest[0]:
        kinds = [_kind(k) for k in rest[0].split(",")]
        names = rest[1:]
        if kinds == ["namespace"]:
            refs.extend(Ref("namespace", "", n) for n in names)
        else:
            refs.extend(Ref(k, namespace or "", n) for k in kinds for n in names)
        if kinds == ["pod"] and (selector := _option(words, "-l", "--selector")):
            labels.append((namespace or "", selector))
    else:
        for word in rest:
            kind, _, name = word.partition("/")
            refs.append(Ref(_kind(kind), namespace or "", name))
    return refs, labels, namespace


@dataclass
class Chart:
    """What the docs' helm commands render: objects by Ref, and the server pods' labels."""

    release: str
    namespace: str
    objects: set[Ref]
    pod_labels: dict[str, str]


def _docs_releases() -> list[tuple[Command, str, str | None]]:
    """(command, release, namespace) of every `helm install|upgrade|uninstall RELEASE ...` in the docs."""
    found = []
    for page in PAGES:
        for command, words in page_commands(page):
            positionals = _positionals(words[1:])
            if words[0] == "helm" and len(positionals) >= 2 and positionals[0] in ("install", "upgrade", "uninstall"):
                found.append((command, positionals[1], _option(words, "-n", "--namespace")))
    return found


def _referenced_secrets(doc: dict[str, Any]) -> Iterator[str]:
    if doc["kind"] == "Certificate":
        yield doc["spec"]["secretName"]
    if doc["kind"] == "Deployment":
        pod = doc["spec"]["template"]["spec"]
        for volume in pod.get("volumes", []):
            if "secret" in volume:
                yield volume["secret"]["secretName"]
        for arg in pod["containers"][0].get("args", []):
            if arg.startswith("--cert-secret="):
                yield arg.split("=", 1)[1]


def _mounted_configmaps(doc: dict[str, Any]) -> Iterator[str]:
    """ConfigMaps the operator creates for the server to mount (the client CA)."""
    if doc["kind"] == "Deployment":
        for volume in doc["spec"]["template"]["spec"].get("volumes", []):
            if "configMap" in volume:
                yield volume["configMap"]["name"]


@cache
def docs_chart() -> Chart:
    releases = _docs_releases()
    assert releases, "the docs show no helm install"
    pairs = {(release, namespace) for _, release, namespace in releases}
    assert len(pairs) == 1, f"the docs' helm commands use different releases or namespaces: {sorted(map(str, pairs))}"
    ((release, namespace),) = pairs
    assert namespace, "the docs' helm commands name no namespace"
    objects: set[Ref] = {Ref("namespace", "", namespace)}
    labels: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="docs-names-") as name:
        directory = Path(name)  # where the docs' relative paths work; the names do not depend on the CA's content
        (directory / "charts").symlink_to(ROOT / "charts")
        (directory / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
        for command, _, _ in releases:
            if command.words[1] not in ("install", "upgrade"):
                continue
            result = subprocess.run(
                _helm_words(command), cwd=directory, env=_env(), capture_output=True, text=True, check=False
            )
            assert result.returncode == 0, f"{command}\n{result.stderr}"
            for doc in yamldocs.load_all(result.stdout):
                if not doc:
                    continue
                meta = doc["metadata"]
                objects.add(Ref(doc["kind"].lower(), meta.get("namespace", ""), meta["name"]))
                objects.update(Ref("secret", meta.get("namespace", ""), s) for s in _referenced_secrets(doc))
                objects.update(Ref("configmap", meta.get("namespace", ""), c) for c in _mounted_configmaps(doc))
                if doc["kind"] == "Deployment":
                    labels = doc["spec"]["template"]["metadata"]["labels"]
    return Chart(release, namespace, objects, labels)


def unexpanded(words: list[str]) -> list[str]:
    """The `$VAR`s a command still holds after the page's variables were expanded: ones the page never defines."""
    return [f"{m[0]} is not defined on the page (no {m[1]}=...)" for word in words for m in _VARIABLE.finditer(word)]


def name_problems(words: list[str], chart: Chart) -> tuple[list[str], int]:
    """What a kubectl command names that the chart does not create, and how many names were checked."""
    refs, selectors, namespace = kubectl_refs(words)
    problems = unexpanded(words)
    checked = 0
    if namespace is not None and namespace != chart.namespace and namespace not in OTHER_NAMESPACES:
        problems.append(f"namespace {namespace!r} is not the release's ({chart.namespace!r})")
    for ref in refs:
        if ref.name.isupper() or ref.namespace in OTHER_NAMESPACES:
            continue  # a placeholder (POD) or someone else's object
        if ref.kind == "namespace":
            checked += 1
            if ref.name != chart.namespace and ref.name not in OTHER_NAMESPACES:
                problems.append(f"namespace {ref.name!r} is not the release's ({chart.namespace!r})")
            continue
        if ref.kind not in CHART_KINDS:
            continue
        checked += 1
        cluster_scoped = Ref(ref.kind, "", ref.name)
        if ref not in chart.objects and cluster_scoped not in chart.objects:
            problems.append(f"the chart creates no {ref.kind} {ref.name!r} in namespace {ref.namespace!r}")
    for selector_namespace, selector in selectors:
        if selector_namespace != chart.namespace:
            continue
        checked += 1
        for requirement in selector.split(","):
            key, _, value = requirement.partition("=")
            if chart.pod_labels.get(key) != value:
                problems.append(f"the server's pods are not labelled {requirement} ({chart.pod_labels})")
    return problems, checked


def test_the_docs_name_the_objects_the_chart_creates() -> None:
    chart = docs_chart()
    problems: list[str] = []
    checked = 0
    for page in PAGES:
        for command, words in page_commands(page):
            if words[0] != "kubectl":
                problems.extend(f"{command}: {p}" for p in unexpanded(words))
                continue
            found, count = name_problems(words, chart)
            checked += count
            problems.extend(f"{command}: {p}" for p in found)
    assert problems == []
    assert checked >= 15, f"only {checked} names checked: is the extraction still reading the commands?"


def test_the_docs_release_gets_the_names_the_docs_use() -> None:
    chart = docs_chart()
    assert Ref("deployment", chart.namespace, "storage-affinity-webhook") in chart.objects
    assert chart.release == "storage-affinity-webhook"


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("kubectl -n storage-affinity rollout status deployment/storage-affinity", "no deployment 'storage-affinity'"),
        ("kubectl -n storage-affinity delete secret saw-tls", "no secret 'saw-tls'"),
        ("kubectl -n storage-affinity-webhook get configmap storage-affinity-policy", "namespace 'storage-affinity-"),
        ("kubectl get --raw /api/v1/namespaces/storage-affinity/services/https:webhook:443/proxy/readyz", "webhook"),
        ("kubectl auth can-i list pods -A --as=system:serviceaccount:storage-affinity:saw", "serviceaccount 'saw'"),
        ("kubectl -n storage-affinity get pods -l app.kubernetes.io/name=webhook", "not labelled"),
        ("kubectl delete namespace webhook-system", "namespace 'webhook-system'"),
        ("kubectl -n storage-affinity delete secret $SECRET", "$SECRET is not defined"),
        ("kubectl -n ${NS} get configmap storage-affinity-policy", "${NS} is not defined"),
    ],
)
def test_a_wrong_name_is_found(command: str, problem: str) -> None:
    problems, _ = name_problems(shlex.split(command), docs_chart())
    assert any(problem in p for p in problems), problems
