"""Group names Phalanx derives must be valid label values (they become phalanx.io/pod-group)."""

from __future__ import annotations

import re

from shared.grouplink import native_group_name, resolve, workload_group_name

LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def test_short_workload_group_names_read_as_they_are() -> None:
    assert workload_group_name("train", "workers") == "train-workers"
    assert workload_group_name("train", "workers", "r1") == "train-workers-r1"


def test_long_workload_group_names_are_shortened_to_a_unique_valid_label_value() -> None:
    a = workload_group_name("llama-pretrain-70b-run42", "workers-node-pool", "jobset-replica-000012")
    b = workload_group_name("llama-pretrain-70b-run42", "workers-node-pool", "jobset-replica-000013")
    assert a != b
    for name in (a, b):
        assert len(name) <= 63 and LABEL_VALUE.match(name), name
        assert name.startswith("llama-pretrain-70b-run42-workers-node-pool-")
    assert a == workload_group_name("llama-pretrain-70b-run42", "workers-node-pool", "jobset-replica-000012")


def test_pods_of_a_long_named_replica_resolve_to_the_shortened_name() -> None:
    ref = {"name": "w" * 40, "podGroup": "g" * 20, "podGroupReplicaKey": "k" * 10}
    link = resolve({}, {}, {"workloadRef": ref})
    assert link is not None and link.name == workload_group_name("w" * 40, "g" * 20, "k" * 10)
    assert len(link.name) <= 63


def test_kai_links_both_as_it_ships_and_as_older_tutorials_wrote_them() -> None:
    """KAI's pod grouper writes ``pod-group-name``; older tutorials ``scheduling.run.ai/pod-group``."""
    shipped = resolve({}, {"pod-group-name": "pg"})
    assert shipped is not None and (shipped.name, shipped.source) == ("pg", "annotation pod-group-name")
    tutorial = resolve({}, {"scheduling.run.ai/pod-group": "pg"})
    assert tutorial is not None and tutorial.source == "annotation scheduling.run.ai/pod-group"
    # Both present and disagreeing: the form KAI ships wins.
    both = resolve({}, {"scheduling.run.ai/pod-group": "old", "pod-group-name": "new"})
    assert both is not None and both.name == "new"


def test_a_pod_of_a_native_podgroup_joins_the_gang_of_that_name() -> None:
    link = resolve({}, {}, {"schedulingGroup": {"podGroupName": "train"}})
    assert link is not None and (link.name, link.source) == ("train", "spec.schedulingGroup.podGroupName")


def test_a_long_native_podgroup_name_is_shortened_to_a_valid_label_value() -> None:
    name = native_group_name("p" * 100)
    assert len(name) <= 63 and LABEL_VALUE.match(name) and name != native_group_name("p" * 99)


def test_the_canonical_label_still_wins_over_the_scheduling_group() -> None:
    link = resolve({"phalanx.io/pod-group": "mine"}, {}, {"schedulingGroup": {"podGroupName": "train"}})
    assert link is not None and link.name == "mine"


def test_a_scheduling_group_without_a_name_is_no_link() -> None:
    assert resolve({}, {}, {"schedulingGroup": {}}) is None
    assert resolve({}, {}, {"schedulingGroup": {"podGroupName": 3}}) is None
