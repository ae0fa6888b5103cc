"""The co-scheduling example end to end offline: `review` (library and CLI) agrees with the pipeline."""

from __future__ import annotations

import json
import subprocess
import sys

from rules import pipeline
from tests.support import EXAMPLES, ROOT, check_patch, load_yaml, policy, subject
from webhook.cli.review import as_request, review
from webhook.state.static import load_static_state

NODE = "ip-10-0-1-17.ec2.internal"
DB_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "databases", "effect": "NoSchedule"}
PIN = {"key": "metadata.name", "operator": "In", "values": [NODE]}


def test_review_gives_the_pipeline_decision() -> None:
    view = load_static_state([EXAMPLES / "cluster.yaml"])
    mover = load_yaml(EXAMPLES / "mover-pod.yaml")

    direct = pipeline.mutate(subject(mover), view, policy())
    offline = review(as_request(mover), policy(), view)

    assert direct.patch
    assert offline.patch == direct.patch
    assert offline.object == check_patch(mover, direct.patch)
    assert offline.allowed and offline.violations == [] and offline.warnings == []
    assert [r for r in offline.decisions if r.startswith("co-scheduled")] == [
        r for r in direct.reasons if r.startswith("co-scheduled")
    ]


def test_cli_review_pins_the_example_mover_next_to_db_0() -> None:
    command = [sys.executable, "-m", "webhook", "review", "-f", "examples/mover-pod.yaml"]
    command += ["--cluster", "examples/cluster.yaml", "-o", "patch"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    patch = {op["path"]: op for op in json.loads(done.stdout)}
    assert patch["/metadata/annotations"]["value"] == {"storage-affinity.io/co-scheduled-with": f"db-0/{NODE}"}
    affinity = patch["/spec/affinity"]["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert affinity == {"nodeSelectorTerms": [{"matchFields": [PIN]}]}
    assert patch["/spec/tolerations"]["value"] == [DB_TOLERATION]
    assert set(patch) == {"/metadata/annotations", "/spec/affinity", "/spec/tolerations"}
