"""Hostile admission requests: each built on demand (some are megabytes) with what a correct answer looks like.

A case is answered either with a plain-text HTTP error naming the problem (`status` 400/413, `text` in the body)
or with an AdmissionReview (`status` 200) whose decision is `allowed`, and whose denial message or warnings
contain `text`. No answer may carry a huge input back: `ECHO_BOUND` caps every answer's size that is not a patch.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from testkit.reviews import admission_review
from tests.support import EXAMPLES, load_yaml

MB = 1024 * 1024
#: The largest plain-text error or denial message any hostile case may produce (the denial bound is 8 KiB).
ECHO_BOUND = 9 * 1024
POLICY_LABELS = {"storage-affinity.io/policy": "true"}
OWN_NAMESPACE = "saw-system"  # the namespace tests/e2e/server.py passes with --namespace


def review(obj: dict[str, Any] | None, operation: str = "CREATE", old: dict[str, Any] | None = None) -> dict[str, Any]:
    return admission_review(operation, obj, old, uid="hostile-1")


def mover(**annotations: str) -> dict[str, Any]:
    """The example mover: its claim data-db-0 is held by db-0, Running on a node of examples/cluster.yaml."""
    pod: dict[str, Any] = load_yaml(EXAMPLES / "mover-pod.yaml")
    if annotations:
        pod["metadata"]["annotations"] = dict(annotations)
    return pod


def with_spec(pod: dict[str, Any], **fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    out["spec"].update(fields)
    return out


def config_map(name: str, namespace: str, data: dict[str, str], labels: dict[str, str] | None = None) -> Json:
    meta = {"name": name, "namespace": namespace, "labels": labels or {}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


Json = dict[str, Any]


def policy_map(text: str) -> Json:
    return config_map("storage-affinity-policy", OWN_NAMESPACE, {"policy.yaml": text}, POLICY_LABELS)


def velero_map(text: str) -> Json:
    """Velero's node-agent ConfigMap, which the policy of examples/policy-velero-source.yaml reads."""
    return config_map("node-agent-config", "velero", {"node-agent.json": text})


def encode(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


#: YAML bombs: aliases (billion laughs), deep nesting, a huge anchored list.
BILLION_LAUGHS = (
    "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "excludedNamespaces: [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
)
DEEP_YAML = "excludedNamespaces: " + "[" * 50_000 + "]" * 50_000 + "\n"
DEEP_BLOCK_YAML = "".join(" " * i + f"k{i}:\n" for i in range(600)) + " " * 600 + "v\n"  # 190 KB
HUGE_ANCHOR_YAML = "excludedNamespaces: &all [" + ",".join(f"ns-{i}" for i in range(100_000)) + "]\n"
OVERLONG_INT_YAML = "enforcement: " + "9" * 10_000 + "\n"
YAML_BOMBS = {
    "billion-laughs": (BILLION_LAUGHS, "YAML syntax error at line 2, column 8: YAML aliases are not accepted"),
    "deep-flow-nesting": (DEEP_YAML, "not valid YAML: nested too deeply"),
    "deep-block-nesting": (DEEP_BLOCK_YAML, "not valid YAML: nested too deeply"),
    "huge-anchor": (HUGE_ANCHOR_YAML, "more than the limit of 262144 (a policy is a few KiB)"),
    "overlong-integer": (OVERLONG_INT_YAML, "not valid YAML: a number has more than 4300 digits"),
}


@dataclass(frozen=True)
class Case:
    name: str
    endpoint: str
    body: Callable[[], bytes]
    status: int
    text: str = ""
    allowed: bool | None = None
    patched: bool = False  # a 200 answer from /mutate that must carry a valid patch

    @property
    def id(self) -> str:
        return f"{self.endpoint}-{self.name}"


def _policy_body(text: str) -> bytes:
    return encode(review(policy_map(text)))


def _unique_items(count: int) -> str:
    return ",".join(f"x{i}" for i in range(count))


ANNOTATION_MB = "x," * (MB // 2)
TYPES = "affinity.volumes.csi-baremetal.dell.com/types"
LOAD_AFFINITY = "storage-affinity.io/load-affinity"
PLACEMENT = "storage-affinity.io/placement"


def _mover_body(**annotations: str) -> Callable[[], bytes]:
    return lambda: encode(review(mover(**annotations)))


def _tolerations_body(count: int) -> Callable[[], bytes]:
    tolerations = [{"key": f"k{i}", "operator": "Exists"} for i in range(count)]
    return lambda: encode(review(with_spec(mover(), tolerations=tolerations)))


def _volumes_body(count: int) -> Callable[[], bytes]:
    extra = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": f"c{i}"}} for i in range(count)]
    return lambda: encode(review(with_spec(mover(), volumes=[*mover()["spec"]["volumes"], *extra])))


CASES: list[Case] = [
    # --- transport: not an AdmissionReview ---------------------------------------------------------------
    Case(
        "non-utf8", "mutate", lambda: b'\xff\xfe{"kind":"AdmissionReview"}', 400, "request body is not UTF-8 (byte 0)"
    ),
    Case(
        "invalid-json", "validate", lambda: b'{"kind": "AdmissionReview",', 400, "request body is not JSON: Expecting"
    ),
    Case("not-a-review", "mutate", lambda: encode(mover()), 400, 'not an AdmissionReview: kind is "Pod"'),
    Case("json-array", "validate", lambda: b"[1, 2, 3]", 400, "not an AdmissionReview: expected a JSON object"),
    Case(
        "100k-nested-arrays", "mutate", lambda: deep_json(100_000).encode(), 400, "not usable JSON: nested too deeply"
    ),
    Case(
        "deep-nesting-inside-the-pod",
        "validate",
        lambda: encode(review(with_spec(mover(), overhead="@"))).replace(b'"@"', deep_json(50_000).encode()),
        400,
        "not usable JSON: nested too deeply",
    ),
    Case(
        "10000-digit-number",
        "mutate",
        lambda: encode(review(with_spec(mover(), priority="@"))).replace(b'"@"', b"9" * 10_000),
        400,
        "request body is not JSON: a number has more than 4300 digits",
    ),
    Case("10MB-body", "mutate", lambda: b" " * (10 * MB), 413, "request body is larger than the limit of 4194304"),
    Case("missing-uid", "mutate", lambda: encode({**review(mover()), "request": {"object": mover()}}), 400, "uid"),
    Case(
        "wrong-apiVersion",
        "validate",
        lambda: encode({**review(mover()), "apiVersion": "admission.k8s.io/v2"}),
        400,
        'unsupported AdmissionReview apiVersion "admission.k8s.io/v2"',
    ),
    Case(
        "1MB-apiVersion",
        "validate",
        lambda: encode({**review(mover()), "apiVersion": "v" * MB}),
        400,
        "unsupported AdmissionReview apiVersion",
    ),
    Case(
        "update-with-oldObject-only",
        "validate",
        lambda: encode(review(None, "UPDATE", old=mover())),
        400,
        "request.object is required for UPDATE",
    ),
    Case(
        "delete-with-oldObject-only", "mutate", lambda: encode(review(None, "DELETE", old=mover())), 200, allowed=True
    ),
    Case(
        "delete-with-oldObject-only", "validate", lambda: encode(review(None, "DELETE", old=mover())), 200, allowed=True
    ),
    # --- big pods: a mover whose anchor exists is still placed, quickly, with a valid patch, at the review budget's
    # limits (rules/budget.py); past them, denied at once naming the limit ----------------------------------------
    *(
        Case(
            f"{count}-tolerations",
            "mutate",
            _tolerations_body(count),
            200,
            allowed=count < 1_000,  # the anchor's toleration is added: 1,000 at most
            patched=count < 1_000,
        )
        for count in (999, 5_000)
    ),
    *(
        Case(
            f"{count}-volumes",
            "mutate",
            _volumes_body(count),
            200,
            allowed=count < 1_000,
            patched=count < 1_000,
        )
        for count in (999, 5_000)
    ),
    *(
        Case(
            f"{count}-annotations",
            "mutate",
            _mover_body(**{f"a{i}.example.com/k": "v" for i in range(count)}),
            200,
            allowed=count <= 1_000,
            patched=count <= 1_000,
        )
        for count in (1_000, 20_000)
    ),
    Case(
        "1MB-foreign-annotation",
        "mutate",
        _mover_body(**{"example.com/blob": ANNOTATION_MB}),
        200,
        allowed=True,
        patched=True,
    ),
    Case("1MB-foreign-annotation", "validate", _mover_body(**{"example.com/blob": ANNOTATION_MB}), 200, allowed=True),
    # --- our own annotations, huge or hostile: denied naming the field, never echoed in full -----------------
    Case(
        "1MB-placement",
        "validate",
        _mover_body(**{PLACEMENT: ANNOTATION_MB}),
        200,
        f'metadata.annotations[{PLACEMENT}]: "x,x,x',
        allowed=False,
    ),
    Case(
        "1MB-own-annotation-key",
        "validate",
        _mover_body(**{"storage-affinity.io/" + "k" * MB: "v"}),
        200,
        "unknown annotation",
        allowed=False,
    ),
    Case(
        "load-affinity-nested-50k",
        "validate",
        _mover_body(**{LOAD_AFFINITY: deep_json(50_000)}),
        200,
        f"metadata.annotations[{LOAD_AFFINITY}]: is not valid JSON: nested too deeply",
        allowed=False,
    ),
    Case(
        "load-affinity-10000-digit-number",
        "validate",
        _mover_body(**{LOAD_AFFINITY: "[" + "9" * 10_000 + "]"}),
        200,
        "is not valid JSON: a number has more than 4300 digits",
        allowed=False,
    ),
    Case(
        "csi-types-100k-unknown-items",
        "validate",
        _mover_body(**{TYPES: _unique_items(100_000)}),
        200,
        f'metadata.annotations[{TYPES}]: unknown type "x0"',
        allowed=False,
    ),
    Case(
        "csi-types-500k-repeats",
        "validate",
        _mover_body(**{TYPES: ANNOTATION_MB}),
        200,
        '"x" is listed more than once',
        allowed=False,
    ),
    # --- ConfigMaps through /validate: policy YAML bombs, Velero JSON bombs -----------------------------------
    *(
        Case(
            f"policy-{name}",
            "validate",
            functools.partial(_policy_body, text),
            200,
            f"data[policy.yaml]: {expected}" if not expected.startswith("more") else expected,
            allowed=False,
        )
        for name, (text, expected) in YAML_BOMBS.items()
    ),
    Case(
        "velero-nested-100k",
        "validate",
        lambda: encode(review(velero_map(deep_json(100_000)))),
        200,
        "data[node-agent.json]: is not valid JSON: nested too deeply",
        allowed=False,
    ),
    Case(
        "velero-10000-digit-number",
        "validate",
        lambda: encode(review(velero_map('{"loadConcurrency": ' + "9" * 10_000 + "}"))),
        200,
        "data[node-agent.json]: is not valid JSON: a number has more than 4300 digits",
        allowed=False,
    ),
    Case(
        "velero-1MB-storage-class",
        "validate",
        lambda: encode(
            review(
                velero_map(
                    json.dumps(
                        {"loadAffinity": [{"nodeSelector": {"matchLabels": {"k": "v"}}, "storageClass": "X" * MB}]}
                    )
                )
            )
        ),
        200,
        "data[node-agent.json].loadAffinity[0].storageClass: 'XXXX",
        allowed=False,
    ),
]
