"""Which rule runs for what, in order: the one table the pipeline reads.

Mutating rules by pod role; validating rules for Pods (and Job pod templates), for the pod templates of other
workloads and for ConfigMaps, run in the order listed, so their findings are reported in that order.
"""

from __future__ import annotations

from collections.abc import Callable

from rules.checks.annotations import own_annotations
from rules.checks.disk import disk_annotations
from rules.checks.placement import placement_consistency
from rules.checks.policy import policy_config_map
from rules.checks.trust import role_trust
from rules.context import Context, PodTarget
from rules.coscheduling.mutation import mutate_mover
from rules.coscheduling.validation import check_co_scheduling
from rules.datasource.mutation import mutate_data_source
from rules.datasource.validation import check_data_source
from rules.datasource.vm import follow_vm
from rules.loadaffinity.mutation import mutate_backup, mutate_restore
from rules.loadaffinity.validation import load_affinity_annotations, policy_config_map_cluster, velero_config_map
from rules.model import Json

Rule = Callable[[Context, PodTarget], None]
ConfigMapRule = Callable[[Context, Json], None]

MUTATORS: dict[str, Rule] = {
    "mover": mutate_mover,
    "backup": mutate_backup,
    "restore": mutate_restore,
}

#: Mutating rules for every pod after its role's rule; each decides from labels first whether the pod is its
#: business, so a pod that is not costs a dictionary lookup or two.
POD_MUTATORS: list[Rule] = [
    mutate_data_source,
    follow_vm,
]

POD_VALIDATORS: list[Rule] = [
    role_trust,
    own_annotations,
    check_co_scheduling,
    load_affinity_annotations,
    disk_annotations,
    placement_consistency,
    check_data_source,
]

#: Validating rules for the pod template of a workload (rules/kube/workloads.py) other than a Job being created:
#: those that need no node, no live claim and no cluster state, since its pods come later, on whatever nodes and
#: claims exist then. A role claimed where the policy does not trust it; unknown `storage-affinity.io/*` keys and
#: values (the role, the load-affinity JSON) and the disk annotations' grammar and contradictions.
TEMPLATE_VALIDATORS: list[Rule] = [
    role_trust,
    own_annotations,
    disk_annotations,
]

CONFIG_MAP_VALIDATORS: list[ConfigMapRule] = [
    policy_config_map,
    velero_config_map,
    policy_config_map_cluster,
]
