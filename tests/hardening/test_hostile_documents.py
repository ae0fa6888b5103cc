"""YAML bombs in `--policy` files and in a policy ConfigMap arriving by watch: refused by name, nothing crashes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rules.policy import PolicyError, default_policy
from tests.hardening.hostile import YAML_BOMBS, policy_map
from tests.support import EXAMPLES, ROOT
from webhook.policy.file import load_policy_file
from webhook.policy.reload import PolicyConfigMapSink, ProblemBoard
from webhook.runtime import Runtime
from webhook.state.static import load_static_state


@pytest.mark.parametrize("bomb", YAML_BOMBS, ids=list(YAML_BOMBS))
def test_policy_file_bomb_is_refused_naming_the_file(tmp_path: Path, bomb: str) -> None:
    text, expected = YAML_BOMBS[bomb]
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError) as refused:
        load_policy_file(path)
    assert str(refused.value).startswith(f"{path}: ")
    assert expected in str(refused.value)
    assert len(str(refused.value)) < 400


def test_cli_reports_a_policy_bomb_as_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(YAML_BOMBS["deep-flow-nesting"][0])
    command = [sys.executable, "-m", "webhook", "review", "-f", str(EXAMPLES / "mover-pod.yaml"), "--policy", str(path)]
    done = subprocess.run(command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr == f"storage-affinity-webhook: {path}: not valid YAML: nested too deeply\n"


@pytest.mark.parametrize("bomb", YAML_BOMBS, ids=list(YAML_BOMBS))
def test_policy_configmap_bomb_from_the_watch_keeps_the_last_good_policy(bomb: str) -> None:
    """The watch thread hands the ConfigMap to the sink: a RecursionError there would end the policy watch."""
    text, expected = YAML_BOMBS[bomb]
    runtime = Runtime(policy=default_policy(), view=load_static_state([EXAMPLES / "cluster.yaml"]), namespace="saw")
    sink = PolicyConfigMapSink(
        runtime,
        ProblemBoard(runtime),
        namespace="saw-system",
        name="storage-affinity-policy",
        base=(default_policy(), "embedded default"),
    )
    sink.apply(policy_map(text))
    assert runtime.policy is default_policy()
    state = runtime.readiness()["policy"]
    assert state.startswith("ok (embedded default); last change refused: ConfigMap saw-system/storage-affinity-policy")
    assert expected in state


def test_the_many_problems_of_a_policy_are_counted_past_fifty() -> None:
    problems = [(f"k{i}", "unknown field") for i in range(50_000)]
    text = str(PolicyError(problems, "policy.yaml"))
    assert text.endswith("k49: unknown field; and 49950 more")
