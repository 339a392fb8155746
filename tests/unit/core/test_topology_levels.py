"""The cluster's topology levels and what a gang asks of them beyond one required domain: a
preferred level (tried first, then the wider ones), slices (every N members inside one domain of
a level), the topology it names, and requests that can never be met (InvalidSpec)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from controller.core import PlannerConfig, plan
from controller.core.config import BLOCK_LABEL, HOSTNAME_LABEL, NVLINK_LABEL, RACK_LABEL
from controller.core.model import Admit, GangKey, Reason, Reject, Wait
from controller.core.topology import held_in

from .builders import NOW, GangLike, NodeLike, PodLike, gang, node, pod, snapshot

G = GangKey("ns", "g")
CONFIG = PlannerConfig(starvation_age_seconds=None, preemption=False)


def decide(
    nodes: Sequence[NodeLike], g: GangLike, pods: Sequence[PodLike] = (), config: PlannerConfig = CONFIG
) -> object:
    return plan(snapshot(nodes, [g], pods), config).for_gang(G)


def busy(node_name: str, gpus: int) -> PodLike:
    return pod(f"busy-{node_name}").ns("other").gpus(gpus).on(node_name)


def fleet() -> list[NodeLike]:
    """2 blocks × 2 racks × 2 NVLink domains × 2 nodes of 8 GPUs (16 nodes, 128 GPUs)."""
    out: list[NodeLike] = []
    for k in range(16):
        block, rack, clique = k // 8, k // 4, k // 2
        out.append(
            node(f"n{k:02d}")
            .gpus(8)
            .label(BLOCK_LABEL, f"b{block}")
            .label(RACK_LABEL, f"r{rack}")
            .label(NVLINK_LABEL, f"c{clique}")
        )
    return out


def labels_of(decision: object, key: str) -> Counter[str]:
    """Pods per domain of ``key``."""
    assert isinstance(decision, Admit), decision
    built = {n.build().name: n.build() for n in fleet()}  # type: ignore[union-attr]
    return Counter(built[str(name)].labels[key] for name in decision.booked.values())


def half_full() -> list[PodLike]:
    """Every rack keeps 12 of its 32 GPUs free (5 of 8 taken on two of its nodes, 4 on the other two):
    no rack holds 16 GPUs, each block holds 24."""
    return [busy(f"n{k:02d}", 5 if k % 4 < 2 else 4) for k in range(16)]


def room(free: dict[int, int]) -> list[PodLike]:
    """Busy pods leaving node k ``free[k]`` GPUs (none where not given)."""
    return [busy(f"n{k:02d}", 8 - free.get(k, 0)) for k in range(16) if free.get(k, 0) < 8]


def test_a_preferred_rack_that_no_rack_can_hold_lands_inside_one_block() -> None:
    # Room for one pod of 4 on n02, n03, n06, n07 (block b0: two in each of its racks) and for two
    # on n08 (block b1). Best fit across the cluster starts on n08, the node that takes the most,
    # and spans both blocks; no rack holds 4 pods, block b0 does.
    g = gang("g").min(4).gated_members(4, gpus=4).topology(preferred=RACK_LABEL)
    d = decide(fleet(), g, room({2: 4, 3: 4, 6: 4, 7: 4, 8: 8}))
    assert labels_of(d, BLOCK_LABEL) == Counter({"b0": 4})
    assert len(labels_of(d, RACK_LABEL)) > 1


def test_a_preferred_rack_is_used_when_one_fits() -> None:
    # Rack r0 holds 4 pods of 4 (n01 two, n02 and n03 one each); r1 two (n04, n05 with 6 free).
    # Best fit across the cluster takes n01, then the fuller n04 before n02: two racks.
    g = gang("g").min(4).gated_members(4, gpus=4).topology(preferred=RACK_LABEL)
    d = decide(fleet(), g, room({1: 8, 2: 4, 3: 4, 4: 6, 5: 6}))
    assert labels_of(d, RACK_LABEL) == Counter({"r0": 4})


def test_a_preferred_level_no_node_carries_is_said_when_the_gang_starts() -> None:
    """A mistyped level must not spread the gang silently: it is placed as if it preferred none
    (here inside one NVLink domain) and its message says why."""
    g = gang("g").min(2).gated_members(2, gpus=8).topology(preferred="example.com/typo")
    d = decide(fleet(), g, room({0: 8, 2: 8, 4: 8, 5: 8}))
    assert labels_of(d, NVLINK_LABEL) == Counter({"c2": 2})
    assert isinstance(d, Admit) and d.message.endswith(
        "; no node is labelled example.com/typo, the preferred level: placed as if none were preferred"
    ), d.message


def test_a_preferred_label_outside_the_topology_is_tried_then_the_topology_levels() -> None:
    # Every node is a row of its own: no row holds 2 pods of 8 GPUs, NVLink domain c2 does.
    rows = [n.label("example.com/row", f"row{k}") for k, n in enumerate(fleet())]
    g = gang("g").min(2).gated_members(2, gpus=8).topology(preferred="example.com/row")
    d = decide(rows, g, room({0: 8, 2: 8, 4: 8, 5: 8}))
    assert labels_of(d, NVLINK_LABEL) == Counter({"c2": 2})
    assert isinstance(d, Admit) and "preferred" not in d.message, d


def test_a_gang_without_gpus_follows_its_preferred_level_too() -> None:
    """An explicit preference holds whatever the gang needs: 4 pods of 4 CPUs preferring a rack go
    to r2, the one rack with room for all four (best fit across the cluster would start on n00,
    the node with the most room, in r0)."""
    nodes = [n.cpu(8) for n in fleet()]
    free = {0: 8, 8: 4, 9: 4, 10: 4, 11: 4}
    pods = [pod(f"cpu-{k}").ns("other").cpu(8 - free.get(k, 0)).on(f"n{k:02d}") for k in range(16) if k != 0]
    members = [pod(f"g-{k}").cpu(4).gated().created(NOW - 10 + k) for k in range(4)]
    g = gang("g").min(4).members(*members).topology(preferred=RACK_LABEL)
    d = decide(nodes, g, pods)
    assert labels_of(d, RACK_LABEL) == Counter({"r2": 4})


def test_without_a_request_the_narrowest_level_that_fits_is_used() -> None:
    # 2 pods × 8 GPUs; empty nodes: n00 (c0), n02 (c1), n04 and n05 (c2). Best fit across the
    # cluster takes the first two, in two NVLink domains; only c2 holds both.
    d = decide(fleet(), gang("g").min(2).gated_members(2, gpus=8), room({0: 8, 2: 8, 4: 8, 5: 8}))
    assert labels_of(d, NVLINK_LABEL) == Counter({"c2": 2})


def test_best_fit_takes_the_tightest_domain_and_keeps_whole_ones_free() -> None:
    # Rack r3 has 8 GPUs free (n15 empty, the rest of it full), every other rack is empty: a gang
    # of 2 × 4 GPUs goes to r3, leaving the empty racks whole for big gangs (best fit across the
    # cluster would take the first empty node, n00 in r0).
    pods = [busy("n12", 8), busy("n13", 8), busy("n14", 8)]
    g = gang("g").min(2).gated_members(2, gpus=4).topology(preferred=RACK_LABEL)
    d = decide(fleet(), g, pods)
    assert labels_of(d, RACK_LABEL) == Counter({"r3": 2})


def test_each_slice_lands_inside_one_nvlink_domain() -> None:
    # 4 slices of 4 pods × 2 GPUs; every node has 6 GPUs free (3 pods), every NVLink domain 6 pods:
    # one slice each. Packed without slices, members 4-7 would span n01 (c0) and n02 (c1).
    pods = [busy(f"n{k:02d}", 2) for k in range(16)]
    g = gang("g").min(16).gated_members(16, gpus=2).topology(slice_key=NVLINK_LABEL, slice_size=4)
    d = decide(fleet(), g, pods)
    per_domain = labels_of(d, NVLINK_LABEL)
    assert all(count % 4 == 0 for count in per_domain.values()), per_domain
    # Slices follow member order: members 0-3, 4-7, ... share a domain each.
    assert isinstance(d, Admit)
    built = {n.build().name: n.build() for n in fleet()}  # type: ignore[union-attr]
    by_member = sorted(d.booked.items(), key=lambda item: int(item[0].rsplit("-", 1)[1]))  # g-0, g-1, ...
    domains = [built[str(where)].labels[NVLINK_LABEL] for _, where in by_member]
    for start in range(0, 16, 4):
        assert len(set(domains[start : start + 4])) == 1, domains


def test_slices_inside_a_required_block() -> None:
    # Block b0 has n00-n03 with 6 GPUs free (3 pods of 2 each: 6 per NVLink domain), block b1 only
    # n08, empty (4 pods). Packed without slices inside b0, the second slice would span c0 and c1;
    # across the cluster, the gang would start on n08 and span both blocks.
    g = (
        gang("g")
        .min(8)
        .gated_members(8, gpus=2)
        .requires(BLOCK_LABEL)
        .topology(slice_key=NVLINK_LABEL, slice_size=4)
    )
    d = decide(fleet(), g, room({0: 6, 1: 6, 2: 6, 3: 6, 8: 8}))
    assert labels_of(d, BLOCK_LABEL) == Counter({"b0": 8})
    assert labels_of(d, NVLINK_LABEL) == Counter({"c0": 4, "c1": 4})


def test_slices_that_do_not_fit_wait_and_say_how_many_do() -> None:
    # Every NVLink domain has 15 GPUs free: no slice of 4 × 4 GPUs fits one, though the cluster
    # holds the gang many times over.
    pods = [busy(f"n{k:02d}", 1) for k in range(0, 16, 2)]
    g = gang("g").min(8).gated_members(8, gpus=4).topology(slice_key=NVLINK_LABEL, slice_size=4)
    d = decide(fleet(), g, pods)
    assert isinstance(d, Wait) and d.reason == Reason.INSUFFICIENT_CAPACITY, d
    assert d.message == (
        f"needs 8 pods × 4 nvidia.com/gpu in 2 slices of 4, each inside one {NVLINK_LABEL} domain; "
        "only 0 such slices fit now"
    )


def test_a_slice_size_that_does_not_divide_the_gang_is_invalid() -> None:
    g = gang("g").min(6).gated_members(6, gpus=1).topology(slice_key=NVLINK_LABEL, slice_size=4)
    d = decide(fleet(), g)
    assert isinstance(d, Reject) and d.reason == Reason.INVALID_SPEC, d
    assert d.message == "slice size 4 does not divide the gang's 6 members"


def test_slices_of_a_gang_whose_members_ask_differently_are_invalid_not_a_wait_for_ever() -> None:
    """Slices are cut from one shape's pods: a launcher beside its workers cannot be sliced, and
    such a gang must say so instead of waiting as if room were short."""
    g = gang("g").min(4).gated_members(1, gpus=0, prefix="launcher").gated_members(3, gpus=2)
    d = decide(fleet(), g.topology(slice_key=NVLINK_LABEL, slice_size=2))
    assert isinstance(d, Reject) and d.reason == Reason.INVALID_SPEC, d
    assert "2 different ways" in d.message


def test_a_slice_wider_than_the_required_level_is_invalid() -> None:
    g = gang("g").min(4).gated_members(4, gpus=1).requires(NVLINK_LABEL)
    d = decide(fleet(), g.topology(slice_key=BLOCK_LABEL, slice_size=2))
    assert isinstance(d, Reject) and d.reason == Reason.INVALID_SPEC, d


def test_an_unknown_topology_is_invalid_and_a_named_one_gives_its_levels() -> None:
    g = gang("g").min(2).gated_members(2, gpus=8)
    d = decide(fleet(), g.topology(name="gb200"))
    assert isinstance(d, Reject) and d.reason == Reason.INVALID_SPEC, d
    assert "'gb200'" in d.message
    # A topology of racks only: the gang is kept in one rack, not one NVLink domain.
    config = PlannerConfig(
        starvation_age_seconds=None, topologies=(("default", (NVLINK_LABEL,)), ("racks", (RACK_LABEL,)))
    )
    # Empty nodes: n00 (r0), n04 and n07 (r1), each in an NVLink domain of its own. Only rack r1
    # holds both pods; best fit across the cluster would take n00 and n04.
    pods = room({0: 8, 4: 8, 7: 8})
    d = decide(fleet(), gang("g").min(2).gated_members(2, gpus=8).topology(name="racks"), pods, config)
    assert labels_of(d, RACK_LABEL) == Counter({"r1": 2})


def test_conflicting_sources_are_invalid() -> None:
    g = gang("g").min(2).gated_members(2, gpus=1).topology(conflict="they disagree")
    d = decide(fleet(), g)
    assert isinstance(d, Reject) and d.reason == Reason.INVALID_SPEC and d.message == "they disagree", d


def test_held_in_names_the_narrowest_domain_holding_every_member() -> None:
    labels = {n.build().name: dict(n.build().labels) for n in fleet()}  # type: ignore[union-attr]
    g = gang("g").min(2).gated_members(2).build()
    assert held_in(CONFIG, g, labels, ["n00", "n01"]) == (NVLINK_LABEL, "c0")
    assert held_in(CONFIG, g, labels, ["n00", "n02"]) == (RACK_LABEL, "r0")
    assert held_in(CONFIG, g, labels, ["n00", "n15"]) is None
    assert held_in(CONFIG, g, labels, []) is None


def test_a_slice_no_domain_could_ever_hold_is_unschedulable() -> None:
    # A slice of 4 × 8 GPUs needs 32 GPUs; an NVLink domain has 16.
    g = gang("g").min(8).gated_members(8, gpus=8).topology(slice_key=NVLINK_LABEL, slice_size=4)
    d = decide(fleet(), g)
    assert isinstance(d, Wait) and d.reason == Reason.UNSCHEDULABLE, d
    assert "no nvidia.com/gpu.clique domain could ever hold them" in d.message


def test_slices_of_one_pod_on_the_hostname_are_no_slicing() -> None:
    """One pod is always on one node: such slices add nothing, and the gang is placed by its own
    request alone (inside one rack here), not refused for a level or cut into 16 pieces."""
    g = gang("g").min(4).gated_members(4, gpus=4).requires(RACK_LABEL)
    d = decide(fleet(), g.topology(slice_key=HOSTNAME_LABEL, slice_size=1), half_full())
    assert isinstance(d, Wait) and d.reason == Reason.INSUFFICIENT_CAPACITY, d
    assert "slice" not in d.message, d.message
    d = decide(fleet(), g.topology(slice_key=HOSTNAME_LABEL, slice_size=1))
    assert len(labels_of(d, RACK_LABEL)) == 1


# ---- Volcano's networkTopology: tier N is the N-th level, narrowest first -------------------------


def test_a_hard_volcano_tier_is_the_level_it_counts_to() -> None:
    # Tier 2 of the default levels (NVLink domain, rack, block, zone) is the rack: every rack keeps
    # 12 GPUs free, so 4 × 4 GPUs wait although each block has 24.
    g = gang("g").min(4).gated_members(4, gpus=4).topology(required_tier=2)
    d = decide(fleet(), g, half_full())
    assert isinstance(d, Wait) and d.reason == Reason.INSUFFICIENT_CAPACITY, d
    assert f"inside one {RACK_LABEL} domain" in d.message
    # Tier 3 (the block) holds them.
    wide = decide(fleet(), gang("g").min(4).gated_members(4, gpus=4).topology(required_tier=3), half_full())
    assert len(labels_of(wide, BLOCK_LABEL)) == 1


def test_a_soft_volcano_tier_is_a_preferred_level() -> None:
    # 2 pods × 8 GPUs, n06 taken. Unasked, one NVLink domain of two free nodes takes them; a soft
    # tier 3 (the block) starts from the blocks: the tightest, b0, and its nodes best fit, n07 (c3)
    # and n05 (c2).
    g = gang("g").min(2).gated_members(2, gpus=8)
    assert len(labels_of(decide(fleet(), g, [busy("n06", 8)]), NVLINK_LABEL)) == 1
    d = decide(fleet(), g.topology(preferred_tier=3), [busy("n06", 8)])
    assert labels_of(d, BLOCK_LABEL) == Counter({"b0": 2})
    assert len(labels_of(d, NVLINK_LABEL)) == 2


def test_volcano_tiers_count_only_the_levels_nodes_carry() -> None:
    """Without NVLink labels tier 1 is the rack, the narrowest level the cluster has (as Volcano's
    tier 1 is its lowest HyperNode tier), not a level no node carries."""
    unlabelled = [
        node(f"n{k:02d}").gpus(8).label(BLOCK_LABEL, f"b{k // 8}").label(RACK_LABEL, f"r{k // 4}")
        for k in range(16)
    ]
    g = gang("g").min(4).gated_members(4, gpus=4).topology(required_tier=1)
    d = decide(unlabelled, g, room({2: 4, 3: 4, 6: 4, 7: 4, 8: 8}))  # no rack holds 4 pods of 4
    assert isinstance(d, Wait) and d.reason == Reason.INSUFFICIENT_CAPACITY, d
    assert f"inside one {RACK_LABEL} domain" in d.message
    d = decide(unlabelled, g, room({8: 8, 9: 8}))  # rack r2 does
    assert isinstance(d, Admit), d
    assert Counter(str(n) for n in d.booked.values()) == Counter({"n08": 2, "n09": 2})


def test_a_tier_beyond_the_topology_or_against_another_level_is_invalid() -> None:
    beyond = decide(fleet(), gang("g").min(2).gated_members(2, gpus=1).topology(required_tier=5))
    assert isinstance(beyond, Reject) and beyond.reason == Reason.INVALID_SPEC, beyond
    assert beyond.message == (
        "Volcano networkTopology highestTierAllowed 5: the nodes carry 3 levels of topology default to "
        f"count tiers in ({NVLINK_LABEL}, {RACK_LABEL}, {BLOCK_LABEL}, narrowest first)"
    )
    against = gang("g").min(2).gated_members(2, gpus=1).requires(BLOCK_LABEL).topology(required_tier=2)
    d = decide(fleet(), against)
    assert isinstance(d, Reject) and d.message == (
        f"required level {BLOCK_LABEL} conflicts with Volcano networkTopology highestTierAllowed 2 "
        f"({RACK_LABEL}); set one of them"
    )


# ---- KAI subgroups with a required level of their own ----------------------------------------------


def subgroup_members(*names: str) -> list[PodLike]:
    """One 8-GPU member per name, named ``<subgroup>-<k>``, in the order given."""
    label = "kai.scheduler/subgroup-name"
    return [
        replace(pod(f"{name}-{k}").gpus(8).gated().created(NOW - 100 + k).build(), labels={label: name})
        for k, name in enumerate(names)
    ]


def test_each_kai_subgroup_lands_inside_one_domain_of_its_own_level() -> None:
    # Each subgroup (2 × 8 GPUs) must fill one NVLink domain. n03 and n07 are taken: no rack has 4
    # free nodes, block b0 has 6 (n00-n02, n04-n06), and the gang packed into it unsliced would put
    # a's two members on n06 and n05, two domains; c0 and c2 are the domains with two free nodes.
    members = subgroup_members("a", "b", "a", "b")
    g = (
        gang("g")
        .min(4)
        .subgroups(a=2, b=2)
        .members(*members)
        .topology(subgroup_levels=(("a", NVLINK_LABEL), ("b", NVLINK_LABEL)))
    )
    d = decide(fleet(), g, [busy("n03", 8), busy("n07", 8)])
    assert isinstance(d, Admit), d
    built = {n.build().name: n.build() for n in fleet()}  # type: ignore[union-attr]
    domains: dict[str, set[str]] = {}
    for uid, where in d.booked.items():
        subgroup = uid.split("/")[1].split("-")[0]
        domains.setdefault(subgroup, set()).add(built[str(where)].labels[NVLINK_LABEL])
    assert all(len(found) == 1 for found in domains.values()), domains
    assert domains["a"] | domains["b"] == {"c0", "c2"}


def test_a_kai_subgroup_no_domain_has_room_for_waits_and_says_so() -> None:
    # Every NVLink domain has one 8-GPU node taken: no subgroup of 2 × 8 GPUs fits one.
    members = subgroup_members("a", "a", "b", "b")
    g = gang("g").min(4).subgroups(a=2, b=2).members(*members)
    g = g.topology(subgroup_levels=(("a", NVLINK_LABEL),))
    pods = [busy(f"n{k:02d}", 8) for k in range(0, 16, 2)]
    d = decide(fleet(), g, pods)
    assert isinstance(d, Wait) and d.reason == Reason.INSUFFICIENT_CAPACITY, d
    assert d.message == (
        "needs 4 pods × 8 nvidia.com/gpu with 1 subgroup each inside one domain of its own level; "
        "only 0 of them fit now"
    )
