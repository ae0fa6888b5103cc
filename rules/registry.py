"""Which rule runs for what, in order: the one table the pipeline reads.

Mutating rules by pod role; validating rules for Pods (and Job pod templates) and for ConfigMaps, run in the
order listed, so their findings are reported in that order.
"""

from __future__ import annotations

from collections.abc import Callable

from rules import coschedule, coschedule_check, disk, loadaffinity, loadaffinity_validation, placement
from rules.context import Context, PodTarget
from rules.model import Json
from rules.own_annotations import own_annotations
from rules.policy_check import policy_config_map

Rule = Callable[[Context, PodTarget], None]
ConfigMapRule = Callable[[Context, Json], None]

MUTATORS: dict[str, Rule] = {
    "mover": coschedule.mutate_mover,
    "backup": loadaffinity.mutate_backup,
    "restore": loadaffinity.mutate_restore,
}

POD_VALIDATORS: list[Rule] = [
    own_annotations,
    coschedule_check.check_co_scheduling,
    loadaffinity_validation.load_affinity_annotations,
    disk.disk_annotations,
    placement.placement_consistency,
]

CONFIG_MAP_VALIDATORS: list[ConfigMapRule] = [
    policy_config_map,
    loadaffinity_validation.velero_config_map,
    loadaffinity_validation.policy_config_map_cluster,
]
