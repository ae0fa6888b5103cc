"""Structural mutations of real AdmissionReviews, as hypothesis strategies over the paths of a seed document.

The schema-valid strategies (strategies.py) never send what a broken client, a fuzzer or an attacker sends: a
key gone, a map where a string was, a number of 5,000 digits, a NUL in a name, an RTL override in a label, a
`!!binary` tag inside the policy's YAML, `NaN` in the JSON body. Each mutation here picks a path of the seed
(so it lands where the webhook actually reads) and breaks it one way; a review gets one to four of them.

A mutated review is plain JSON data, except for `Raw` leaves: JSON text spliced into the body verbatim, for what
Python's encoder cannot write (`NaN`, `1e400`, an integer of more than 4300 digits).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, overload

import yaml
from hypothesis import strategies as st

from rules.annotations import LOAD_AFFINITY
from rules.model import Json
from rules.pipeline import VALIDATED_KINDS
from rules.policy import POLICY_KEY, POLICY_LABEL
from testkit import yamldocs
from testkit.reviews import admission_review
from tests.fuzz import profiles
from tests.fuzz import strategies as s
from tests.support import EXAMPLES, fixtures, load_yaml

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Raw:
    """A JSON token written into the body as it is."""

    text: str


# --- the seeds ------------------------------------------------------------------------------------------------

#: The policy every structural fuzz runs under: the example load-affinity policy (so backup and restore pods are
#: placed) that also names Velero's node-agent ConfigMap (so that ConfigMap is validated).
VELERO_SOURCE = {"configMap": {"namespace": s.VELERO_CONFIG[0], "name": s.VELERO_CONFIG[1]}}


def fuzz_policy_document() -> Json:
    doc: Json = load_yaml(EXAMPLES / "policy-load-affinity.yaml")
    return {**doc, "loadAffinitySource": VELERO_SOURCE}


@functools.cache
def cluster_state() -> tuple[Json, ...]:
    """The example cluster (shared: the webhook never changes the state it is given)."""
    return tuple(load_yaml(EXAMPLES / "cluster.yaml")["items"])


def _example_reviews() -> list[tuple[str, Json]]:
    """Every example object as kube-apiserver would send it; the example policy as a labelled ConfigMap."""
    out = [("admissionreview-mover.json", json.loads((EXAMPLES / "admissionreview-mover.json").read_text()))]
    for path in sorted(EXAMPLES.glob("*.yaml")):
        doc = load_yaml(path)
        if doc.get("kind") in VALIDATED_KINDS:
            out.append((path.name, admission_review("CREATE", doc, uid=f"seed-{path.stem}")))
        elif "kind" not in doc:  # a bare policy document
            config_map = s.policy_config_map(doc)
            out.append((path.name, admission_review("CREATE", config_map, uid=f"seed-{path.stem}")))
    return out


@functools.cache
def static_seeds() -> tuple[tuple[str, Json], ...]:
    """The foreign fixtures and the examples: reviews written by other people and by hand."""
    return tuple(fixtures()) + tuple(_example_reviews())


def _review(obj: Json, operation: str = "CREATE") -> Json:
    old = obj if operation == "UPDATE" else None
    return admission_review(operation, obj, old, uid="seed", userInfo={"username": "fuzzer"})


Seed = tuple[str, Json, tuple[Json, ...]]


def _seed(name: str, obj: Json, state: list[Json] | tuple[Json, ...], operation: str = "CREATE") -> Seed:
    return name, _review(obj, operation), tuple(state)


def _scenario_seed(kind: str, scenario: tuple[list[Json], Json]) -> Seed:
    return _seed(f"data source ({kind})", scenario[1], scenario[0])


def _velero_seed(role: str, scenario: tuple[list[Json], Json, Json]) -> Seed:
    return _seed(role, scenario[2], scenario[0])


def built_seed_kinds() -> dict[str, st.SearchStrategy[Seed]]:
    """What the schema-valid strategies build, by kind of seed: every role, every data-source kind, Jobs and the
    other workloads, both kinds of ConfigMap. Each comes with the cluster state it was built for."""
    velero = {
        role: s.velero_scenarios(label).map(functools.partial(_velero_seed, role))
        for role, label in (("backup", s.BACKUP), ("restore", s.RESTORE))
    }
    sources = {
        f"data source ({kind})": s.data_source_scenarios(kind).map(functools.partial(_scenario_seed, kind))
        for kind in s.DATA_SOURCE_KINDS
    }
    states = s.cluster_states()
    return {
        "pod": s.pod_scenarios().map(lambda sc: _seed("pod", sc[1], sc[0])),
        "mover": s.mover_scenarios().map(lambda sc: _seed("mover", sc[1], sc[0])),
        "mover job": s.mover_scenarios(job=True).map(lambda sc: _seed("mover job", sc[1], sc[0])),
        **velero,
        **sources,
        "cdi worker": s.cdi_scenarios().map(lambda sc: _seed("cdi worker", sc[1], sc[0])),
        "job": st.tuples(s.jobs(), states).map(lambda js: _seed("job", js[0], js[1])),
        "workload": st.tuples(s.workloads(), states).map(lambda ws: _seed("workload", ws[0], ws[1])),
        "configmap": st.tuples(s.config_maps(), st.sampled_from(("CREATE", "UPDATE"))).map(
            lambda co: _seed("configmap", co[0], cluster_state(), co[1])
        ),
        "velero configmap": s.velero_config_map().map(lambda cm: _seed("velero configmap", cm, cluster_state())),
    }


def live_built_seeds() -> st.SearchStrategy[Seed]:
    """Reviews the schema-valid strategies build, with the cluster state they were built for."""
    return st.one_of(*built_seed_kinds().values())


#: Built seeds of each kind drawn once for the bounded run (a scenario takes about 200 ms to draw, a mutation 10):
#: the pool holds every kind of `built_seed_kinds` however many kinds there are.
POOL_PER_KIND = 2


@functools.cache
def built_pool() -> tuple[Seed, ...]:
    """POOL_PER_KIND built seeds of every kind, the same on every run. Call it outside any test that uses @given
    (hypothesis does not nest): the fixtures of the structural fuzz do."""
    return tuple(seed for kind in built_seed_kinds().values() for seed in profiles.fixed_draws(kind, POOL_PER_KIND))


def built_seeds() -> st.SearchStrategy[tuple[str, Json, tuple[Json, ...]]]:
    """Built seeds: from the fixed pool in the bounded run, freshly drawn in a long one."""
    if not profiles.BOUNDED:
        return live_built_seeds()
    size = POOL_PER_KIND * len(built_seed_kinds())  # not len(built_pool()): that would draw it at collection
    return st.integers(0, size - 1).map(lambda i: built_pool()[i])


def seeds() -> st.SearchStrategy[tuple[str, Json, tuple[Json, ...]]]:
    """(name, review, cluster state): a static seed against the example cluster, or a built one."""
    return st.one_of(static_seed_cases(), built_seeds())


def static_seed_cases() -> st.SearchStrategy[tuple[str, Json, tuple[Json, ...]]]:
    """A fixture or an example, against the example cluster."""
    return st.integers(0, len(static_seeds()) - 1).map(lambda i: (*static_seeds()[i], cluster_state()))


# --- paths ----------------------------------------------------------------------------------------------------


def paths(doc: Any, prefix: Path = ()) -> list[Path]:
    """Every path below `doc` (map values and list items), parents before children."""
    out: list[Path] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.append((*prefix, key))
            out.extend(paths(value, (*prefix, key)))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out.append((*prefix, index))
            out.extend(paths(value, (*prefix, index)))
    return out


def get(doc: Any, path: Path) -> Any:
    for part in path:
        doc = doc[part]
    return doc


@overload
def _replace(doc: Json, path: Path, value: Any) -> Json: ...
@overload
def _replace(doc: Any, path: Path, value: Any) -> Any: ...
def _replace(doc: Any, path: Path, value: Any) -> Any:
    """A copy of `doc` with the value at `path` replaced or added (only the containers on the path are copied)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    container = copy.copy(doc)
    container[head] = _replace(doc[head], rest, value) if rest else value
    return container


@overload
def _delete(doc: Json, path: Path) -> Json: ...
@overload
def _delete(doc: Any, path: Path) -> Any: ...
def _delete(doc: Any, path: Path) -> Any:
    parent = get(doc, path[:-1])
    container = copy.copy(parent)
    del container[path[-1]]
    return _replace(doc, path[:-1], container)


@overload
def _rename(doc: Json, path: Path, key: str) -> Json: ...
@overload
def _rename(doc: Any, path: Path, key: str) -> Any: ...
def _rename(doc: Any, path: Path, key: str) -> Any:
    parent = get(doc, path[:-1])
    renamed = {(key if k == path[-1] else k): v for k, v in parent.items()}
    return _replace(doc, path[:-1], renamed)


# --- the body -------------------------------------------------------------------------------------------------


def encode(doc: Any, *, ensure_ascii: bool = True) -> bytes:
    """The request body: JSON with every `Raw` leaf written verbatim."""
    raws: list[str] = []

    def placeholder(value: Any) -> str:
        if not isinstance(value, Raw):
            raise TypeError(f"not JSON: {value!r}")
        raws.append(value.text)
        return f"zqRAW{len(raws) - 1}qz"

    text = json.dumps(doc, default=placeholder, ensure_ascii=ensure_ascii)
    text = re.sub(r'"zqRAW(\d+)qz"', lambda m: raws[int(m.group(1))], text)
    return text.encode("utf-8", "surrogatepass")


# --- values ---------------------------------------------------------------------------------------------------

CONTROL = ("\x00", "\x1b", "\x7f", "\x85", "\x9b", "\x07", "\x08", "\r", "\x1b[31m", "\x9b2J")
BIDI = ("\u202e", "\u202d", "\u202a", "\u202b", "\u202c", "\u2066", "\u2067", "\u2068", "\u2069", "\u200f")
#: A digit string longer than Python converts to int without raising (sys.get_int_max_str_digits is 4300).
LONG_DIGITS = "9" * 4301
HUGE_NUMBERS: tuple[Any, ...] = (
    2**63,
    -(2**63) - 1,
    2**64,
    10**40,
    -(10**40),
    1e308,
    -1e308,
    5e-324,
    Raw("1e400"),
    Raw("-1e400"),
    Raw(LONG_DIGITS),
    Raw("-" + "7" * 5000),
    Raw("1" + "0" * 4400 + ".5"),
    LONG_DIGITS,
    "-" + LONG_DIGITS,
    str(2**63),
    str(-(2**63) - 1),
    "1e400",
    "0x7fffffffffffffff",
    "1_000",
    "+5",
    " 5",
)
NON_FINITE = (Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e999"), Raw("-1e999"), Raw("-0"))
HUGE_SIZES = (4097, 70_000, 300_000)
#: Tagged and implicitly typed YAML values: every one is either refused or turned into something that is not a
#: plain string, number, bool, null, list or map (bytes, a datetime, a set, NaN).
YAML_VALUES = (
    "!!binary aGk=",
    "!!python/object:builtins.dict {}",
    "!!python/object/apply:os.getcwd []",
    "!!python/name:os.system",
    "!!timestamp 2001-12-14t21:59:43.10-05:00",
    "2001-12-14",
    "!!set {a, b}",
    "!!omap [{a: 1}]",
    "!!pairs [[a, 1]]",
    "!!float .nan",
    ".nan",
    "-.inf",
    "!!int 0x1F",
    "0o17",
    "!custom x",
    "!!str 5",
    "!!null ''",
    "!!bool yes",
    "yes",
    "1" * 4400,
    "!!float 1e400",
    "!!merge {}",
    json.dumps(LONG_DIGITS),
    "!<tag:yaml.org,2002:binary> aGk=",
)
#: Values to try for the fields whose meaning switches on their value.
ENUMS: dict[str, tuple[Any, ...]] = {
    "operation": ("CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH", "create", "", "CREATE ", "*"),
    "apiVersion": (
        "admission.k8s.io/v1",
        "admission.k8s.io/v1beta1",
        "admission.k8s.io/v2",
        "admission.k8s.io/",
        "v1",
        "batch/v1",
        "",
        "admission.k8s.io/v1/x",
    ),
    "kind": ("Pod", "Job", "ConfigMap", "AdmissionReview", "Deployment", "pod", "PodList", "", "List"),
    "operator": ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Equal", "in", ""),
    "effect": ("NoSchedule", "PreferNoSchedule", "NoExecute", "", "Bogus"),
    "restartPolicy": ("Never", "Always", "OnFailure", ""),
    "dryRun": (True, False, "true", 1),
    "namespace": ("", "velero", "kube-system", "saw", "Bad_NS", "a" * 64),
    "name": ("", "storage-affinity-policy", "node-agent-config", "x" * 254, "a..b"),
    "group": ("", "batch", "apps", "storage.k8s.io"),
    "version": ("v1", "v1beta1", ""),
    "storageClassName": ("gp3", "efs", "", "GP3"),
    "claimName": ("data-db-0", "", "cache-data", "missing"),
    "nodeName": ("ip-10-0-1-17.ec2.internal", "ip-10-0-2-42.ec2.internal", "", "unknown-node"),
}
#: Keys added where they were absent, each with values that once stood under that key somewhere.
GRAFTS: dict[str, tuple[Any, ...]] = {
    "affinity": (
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["3"]}]}]
                }
            }
        },
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
    ),
    "nodeSelector": ({"kubernetes.io/os": "linux"}, {}),
    "nodeName": ("ip-10-0-1-17.ec2.internal",),
    "volumes": ([{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}],),
    "tolerations": ([{"key": "dedicated", "operator": "Equal", "value": "databases", "effect": "NoSchedule"}],),
    "annotations": (
        {LOAD_AFFINITY: '[{"nodeSelector": {"matchExpressions": [{"key": "n", "operator": "Lt", "values": ["9"]}]}}]'},
        {"storage-affinity.io/role": "backup"},
    ),
    "labels": (
        {"velero.io/exposer-pod-group": "snapshot-exposer"},
        {"app.kubernetes.io/created-by": "volsync"},
        {POLICY_LABEL: "true"},
    ),
    "data": ({POLICY_KEY: "enforcement: warn\n"}, {"node-agent-config.json": '{"loadAffinity": []}'}),
    "metadata": ({}, {"name": "x", "namespace": "shop"}),
    "spec": ({}, {"template": {"spec": {"containers": []}}}),
    "template": ({"metadata": {"labels": {"app.kubernetes.io/created-by": "volsync"}}, "spec": {}},),
    "object": ({"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {"containers": []}},),
    "oldObject": ({"apiVersion": "v1", "kind": "Pod", "metadata": {}},),
}


def _leaves() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=6),
    )


_ANY_VALUE = st.recursive(
    _leaves(),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=6), inner, max_size=2),
    max_leaves=4,
)


def _any_value() -> st.SearchStrategy[Any]:
    return _ANY_VALUE


def _swapped(value: Any) -> list[Any]:
    """The same content as another type: a "5" as 5, a list as a map, a map as a list, and so on."""
    out: list[Any] = [None, True, 0, 1.5, "", "x", [], {}, [value], {"x": value}]
    if isinstance(value, str):
        out += [int(value)] if re.fullmatch(r"-?[0-9]{1,4000}", value) else [len(value)]
        out += [value == "true", {value: value}]
    elif isinstance(value, bool):
        out += [str(value).lower(), int(value)]
    elif isinstance(value, int | float):
        if isinstance(value, int):
            other: Any = float(value) if abs(value) < 2**1023 else str(value)  # float() of a larger int overflows
        else:
            other = int(value) if math.isfinite(value) else str(value)
        out += [str(value), other, value != 0]
    elif isinstance(value, list):
        out += [{str(i): v for i, v in enumerate(value)}, json.dumps(value, default=str)]
    elif isinstance(value, dict):
        out += [list(value.values()), list(value), json.dumps(value, default=str)]
    return out


def _inserted(text: str, chars: str, where: int) -> str:
    at = where % (len(text) + 1)
    return text[:at] + chars + text[at:]


# --- YAML-carrying strings ------------------------------------------------------------------------------------


def _is_config_map(doc: Any, path: Path) -> bool:
    return len(path) >= 2 and path[-2] == "data" and isinstance(path[-1], str)


def carriers(doc: Json) -> list[Path]:
    """Paths of strings whose content the webhook parses: ConfigMap data (a policy's YAML, Velero's JSON) and
    the load-affinity annotation."""
    out = []
    for path in paths(doc):
        value = get(doc, path)
        if not isinstance(value, str) or not path:
            continue
        if _is_config_map(doc, path) or path[-1] == LOAD_AFFINITY:
            out.append(path)
    return out


def _carrier_target(doc: Json) -> Path | None:
    """Where a carrier can be added when the seed has none: the pod's (or template's) annotations, or a
    ConfigMap's data."""
    obj = (doc.get("request") or {}).get("object") if isinstance(doc.get("request"), dict) else None
    if not isinstance(obj, dict):
        return None
    if obj.get("kind") == "ConfigMap":
        return ("request", "object", "data", POLICY_KEY)
    if obj.get("kind") == "Job":
        template = (obj.get("spec") or {}).get("template") if isinstance(obj.get("spec"), dict) else None
        return ("request", "object", "spec", "template", "metadata", "annotations", LOAD_AFFINITY) if template else None
    return ("request", "object", "metadata", "annotations", LOAD_AFFINITY)


@overload
def _ensure(doc: Json, path: Path, leaf: Any) -> Json | None: ...
@overload
def _ensure(doc: Any, path: Path, leaf: Any) -> Any: ...
def _ensure(doc: Any, path: Path, leaf: Any) -> Any:
    """`doc` with maps created along `path` and `leaf` at its end (fails quietly: returns None)."""
    node = doc
    for depth, part in enumerate(path[:-1]):
        child = node.get(part) if isinstance(node, dict) else None
        if child is None:
            return _replace(doc, path[:depth], {**node, part: _nest(path[depth + 1 :], leaf)})
        if not isinstance(child, dict):
            return None
        node = child
    return _replace(doc, path, leaf) if isinstance(node, dict) else None


def _nest(path: Path, leaf: Any) -> Any:
    return leaf if not path else {path[0]: _nest(path[1:], leaf)}


PLACEHOLDER = "zqTAGqz"


def tag_text(text: str, choose: Callable[[list[Path]], Path], tagged: str, json_style: bool) -> str:
    """`text` (YAML or JSON) with the value at a chosen path of its document replaced by `tagged`, written the
    way the text was (flow JSON or block YAML); appended as a new key when the text is no document."""
    try:
        doc = yamldocs.load(text)
    except (yaml.YAMLError, ValueError):  # ValueError: an integer of more than 4300 digits
        doc = None
    if isinstance(doc, dict | list) and doc:
        inner = paths(doc)
        chosen = choose([(), *inner])
        doc = _replace(doc, chosen, PLACEHOLDER)
    elif isinstance(doc, dict | list) or doc is None:
        doc = {"enforcement": PLACEHOLDER} if not json_style else [PLACEHOLDER]
    else:
        doc = PLACEHOLDER
    if json_style:
        return json.dumps(doc, default=str).replace(f'"{PLACEHOLDER}"', tagged)
    dumped = yaml.safe_dump(doc, default_flow_style=False)
    return dumped.replace(PLACEHOLDER, tagged)


# --- the mutations --------------------------------------------------------------------------------------------

Mutation = Callable[[st.DrawFn, Json], Json]


def one_of_list(draw: st.DrawFn, options: list[Any] | tuple[Any, ...]) -> Any:
    """An element drawn by index: `sampled_from` labels itself from its elements, slow for big documents."""
    return options[draw(st.integers(0, len(options) - 1))]


#: The fields the webhook reads: a mutation lands on one of them (or below one) three times in four, since a
#: broken container image or resource request only tests the JSON decoder again.
READ_FIELDS = frozenset(
    {
        "request", "uid", "kind", "operation", "namespace", "name", "object", "oldObject", "dryRun",
        "metadata", "labels", "annotations", "generateName", "spec", "template", "volumes", "persistentVolumeClaim",
        "claimName", "ephemeral", "volumeClaimTemplate", "accessModes", "storageClassName", "affinity",
        "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", "matchExpressions", "matchFields",
        "preference", "weight", "key", "operator", "values", "nodeSelector", "nodeName", "tolerations", "effect",
        "value", "tolerationSeconds", "schedulingGates", "data", "status", "phase", "ownerReferences", "controller",
        "userInfo", "username", "containers",
    }
)  # fmt: skip
#: Maps whose keys are the user's: any key below them is read.
FREE_MAPS = frozenset({"labels", "annotations", "data", "nodeSelector", "matchLabels"})


def is_read(path: Path) -> bool:
    last = next((p for p in reversed(path) if isinstance(p, str)), None)
    parent = path[-2] if len(path) > 1 else None
    return last in READ_FIELDS or parent in FREE_MAPS


def in_object(path: Path) -> bool:
    """Inside the reviewed object (or the old one): where most mutations land. The envelope around it gets its
    own mutation, since breaking it only ever earns a 400 and would take most of the budget."""
    return len(path) > 2 and path[0] == "request" and path[1] in ("object", "oldObject")


def _pick(draw: st.DrawFn, doc: Json, where: Callable[[Any, Path], bool] = lambda v, p: True) -> Path | None:
    chosen = [p for p in paths(doc) if in_object(p) and where(get(doc, p), p)]
    read = [p for p in chosen if is_read(p)]
    if read and draw(st.integers(0, 3)) > 0:
        chosen = read
    return one_of_list(draw, chosen) if chosen else None


def _numeric(value: Any, path: Path) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) or (
        isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value) is not None
    )


def _is_string(value: Any, path: Path) -> bool:
    return isinstance(value, str)


def delete_key(draw: st.DrawFn, doc: Json) -> Json:
    path = _pick(draw, doc)
    return doc if path is None else _delete(doc, path)


def swap_type(draw: st.DrawFn, doc: Json) -> Json:
    path = _pick(draw, doc)
    if path is None:
        return doc
    value = one_of_list(draw, _swapped(get(doc, path))) if draw(st.booleans()) else draw(_any_value())
    return _replace(doc, path, value)


def huge_number(draw: st.DrawFn, doc: Json) -> Json:
    """A number (or a number in a string, as Gt/Lt values are) past int64, past 4300 digits, past float."""
    path = _pick(draw, doc, _numeric) if draw(st.booleans()) else None
    path = path or _pick(draw, doc)
    if path is None:
        return doc
    as_text = isinstance(get(doc, path), str)
    options = [n for n in HUGE_NUMBERS if isinstance(n, str) == as_text]
    return _replace(doc, path, one_of_list(draw, options))


def non_finite(draw: st.DrawFn, doc: Json) -> Json:
    path = _pick(draw, doc)
    return doc if path is None else _replace(doc, path, one_of_list(draw, NON_FINITE))


def huge_string(draw: st.DrawFn, doc: Json) -> Json:
    path = _pick(draw, doc)
    if path is None:
        return doc
    size = draw(st.sampled_from(HUGE_SIZES))
    old = get(doc, path)
    unit = old if isinstance(old, str) and old else draw(st.sampled_from(("x", "a,", "é", "9")))
    return _replace(doc, path, (unit * (size // len(unit) + 1))[:size])


def _special_chars(alphabet: tuple[str, ...]) -> Mutation:
    def mutation(draw: st.DrawFn, doc: Json) -> Json:
        chars = "".join(draw(st.lists(st.sampled_from(alphabet), min_size=1, max_size=3)))
        as_key = draw(st.booleans())
        path = _pick(draw, doc, (lambda v, p: isinstance(p[-1], str)) if as_key else _is_string)
        if path is None:
            return doc
        if as_key:
            key = path[-1]
            assert isinstance(key, str)
            return _rename(doc, path, _inserted(key, chars, draw(st.integers(0, 64))))
        return _replace(doc, path, _inserted(get(doc, path), chars, draw(st.integers(0, 64))))

    return mutation


control_chars = _special_chars(CONTROL)
bidi_chars = _special_chars(BIDI)
#: Lone surrogates: decoded by Python's JSON reader, refused by orjson and by every UTF-8 writer.
lone_surrogates = _special_chars(("\ud800", "\udbff", "\udc00", "\udfff"))


def envelope(draw: st.DrawFn, doc: Json) -> Json:
    """A field of the AdmissionReview around the object deleted, retyped or set to an odd value."""
    chosen = [p for p in paths(doc) if not in_object(p)]
    if not chosen:
        return doc
    path = one_of_list(draw, chosen)
    how = draw(st.integers(0, 2))
    if how == 0:
        return _delete(doc, path)
    if how == 1 and path[-1] in ENUMS:
        return _replace(doc, path, one_of_list(draw, ENUMS[str(path[-1])]))
    return _replace(doc, path, one_of_list(draw, _swapped(get(doc, path))))


def enum_value(draw: st.DrawFn, doc: Json) -> Json:
    path = _pick(draw, doc, lambda v, p: p[-1] in ENUMS)
    if path is None:
        return doc
    key = path[-1]
    assert isinstance(key, str)
    return _replace(doc, path, one_of_list(draw, ENUMS[key]))


def graft(draw: st.DrawFn, doc: Json) -> Json:
    """A known key added to a map that lacks it, with a value that belongs there or any value."""
    path = _pick(draw, doc, lambda v, p: isinstance(v, dict) and any(k not in v for k in GRAFTS))
    if path is None:
        return doc
    target = get(doc, path)
    key = draw(st.sampled_from(sorted(k for k in GRAFTS if k not in target)))
    value = one_of_list(draw, GRAFTS[key]) if draw(st.booleans()) else draw(_any_value())
    return _replace(doc, path, {**target, key: value})


def yaml_tag(draw: st.DrawFn, doc: Json) -> Json:
    """An unknown or unsafe YAML tag (or an implicitly typed value) inside a string the webhook parses."""
    found = carriers(doc)
    tagged = one_of_list(draw, YAML_VALUES)
    if found:
        path = one_of_list(draw, found)
        text = get(doc, path)
    else:
        target = _carrier_target(doc)
        if target is None:
            return doc
        path, text = target, ""
    json_style = path[-1] != POLICY_KEY
    mutated = tag_text(text, lambda options: one_of_list(draw, options), tagged, json_style)
    out = _ensure(doc, path, mutated)
    if out is None:
        return doc
    if path[-1] == POLICY_KEY:  # the policy rule reads only ConfigMaps labelled as policies
        labels = _ensure(out, ("request", "object", "metadata", "labels", POLICY_LABEL), "true")
        out = labels if labels is not None else out
    return out


def carried(draw: st.DrawFn, doc: Json) -> Json:
    """A value inside a string the webhook parses (a policy's YAML, Velero's JSON, the load-affinity
    annotation) deleted, retyped or made a huge number, the text written back the way it was."""
    found = carriers(doc)
    if not found:
        return doc
    path = one_of_list(draw, found)
    text = get(doc, path)
    try:
        inner = yamldocs.load(text)
    except (yaml.YAMLError, ValueError):
        return doc
    inner_paths = paths(inner)
    if not inner_paths:
        return doc
    at = one_of_list(draw, inner_paths)
    how = draw(st.integers(0, 2))
    if how == 0:
        inner = _delete(inner, at)
    else:
        old = get(inner, at)
        options = _swapped(old) if how == 1 else [n for n in HUGE_NUMBERS if not isinstance(n, Raw)]
        inner = _replace(inner, at, one_of_list(draw, options))
    written = yaml.safe_dump(inner) if path[-1] == POLICY_KEY else json.dumps(inner, default=str)
    return _replace(doc, path, written)


MUTATIONS: tuple[Mutation, ...] = (
    delete_key,
    swap_type,
    swap_type,
    huge_number,
    non_finite,
    huge_string,
    control_chars,
    bidi_chars,
    lone_surrogates,
    enum_value,
    envelope,
    graft,
    yaml_tag,
    yaml_tag,
    carried,
    carried,
)


@st.composite
def mutated(draw: st.DrawFn, doc: Json, max_mutations: int = 4) -> Json:
    """`doc` after one to `max_mutations` structural mutations, each over the paths of the result so far."""
    count = draw(st.integers(1, max_mutations))
    for _ in range(count):
        mutation = one_of_list(draw, MUTATIONS)
        doc = mutation(draw, doc)
    return doc
