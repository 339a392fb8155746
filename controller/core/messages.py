"""Every sentence the core writes for a person (PodGroup conditions, Events). Nothing else formats.

Messages say what is missing in the cluster's own words, e.g.
``needs 8 pods × 1 nvidia.com/gpu; best placement fits 5: node-a 2, node-b 2, node-c 1``.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.quantities import format_amount

# (count, amount, resource): "8 pods × 1 nvidia.com/gpu"
Demand = Sequence[tuple[int, int, str]]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m"


def demand(parts: Demand) -> str:
    """``8 pods × 1 nvidia.com/gpu + 1 pod × 4 cpu``, identical members grouped."""
    out = []
    for count, amount, resource in parts:
        pods = _plural(count, "pod")
        out.append(pods if resource == "pods" else f"{pods} × {format_amount(resource, amount)} {resource}")
    return " + ".join(out)


def node_counts(counts: Sequence[tuple[str, int]], limit: int) -> str:
    """``node-a 2, node-b 2, node-c 1`` (most first), at most `limit` nodes listed."""
    ordered = sorted(counts, key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{name} {n}" for name, n in ordered[:limit])
    if len(ordered) > limit:
        shown += f", … (+{len(ordered) - limit} more nodes)"
    return shown


def node_list(names: Sequence[str], limit: int) -> str:
    shown = ", ".join(names[:limit])
    if len(names) > limit:
        shown += f", … (+{len(names) - limit} more)"
    return shown


# ---- why no node is allowed (fit.Eligibility.explain) ----------------------------------------------


def no_nodes() -> str:
    return "the cluster has no nodes"


def no_ready_node() -> str:
    return "no node is Ready and schedulable"


def selector_unmatched(selector: Sequence[tuple[str, str]]) -> str:
    return "no Ready node matches nodeSelector " + ", ".join(f"{key}={value}" for key, value in selector)


def affinity_unmatched() -> str:
    return "no Ready node matches the required node affinity"


def taint_text(key: str, value: str, effect: str) -> str:
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def taints_untolerated(matching: int, narrowed: bool, example: str | None) -> str:
    """Every (matching) Ready node has a NoSchedule/NoExecute taint the pod does not tolerate."""
    suffix = f" (e.g. {example})" if example else ""
    if matching == 1 and narrowed:
        return f"the only matching Ready node has an untolerated taint{suffix}"
    if narrowed:
        return f"every matching Ready node has an untolerated taint{suffix}"
    return f"every node has an untolerated taint{suffix}"


def sibling_detail(name: str, text: str) -> str:
    return f"{name}: {text}"


# ---- waiting ---------------------------------------------------------------------------------


def waiting_for_members(live: int, min_member: int) -> str:
    return f"{live} of {min_member} members exist"


def waiting_for_subgroup(name: str, live: int, min_member: int) -> str:
    return f"subgroup {name}: {live} of {min_member} members exist"


def min_resources_short(short: Sequence[tuple[str, int, int]]) -> str:
    """(resource, wanted, free): ``minResources needs 8 nvidia.com/gpu free where its pods may run, 5
    are``."""
    parts = [
        f"{format_amount(name, wanted)} {name} free where its pods may run, {format_amount(name, free)} are"
        for name, wanted, free in short
    ]
    return "minResources needs " + "; ".join(parts)


def never_fits_when_complete(live: int, min_member: int, why: str) -> str:
    return f"{live} of {min_member} members exist, and all {min_member} could never run together: {why}"


def admission_record_too_large(members: int, size: int, limit: int) -> str:
    return (
        f"{members} members are more than Phalanx can admit as one gang: the admission it records on"
        f" the PodGroup before lifting any gate would take {size // 1024} KiB, and at most"
        f" {limit // 1024} KiB fit in the annotations Kubernetes allows an object"
    )


def foreign_gates(gates: Sequence[str]) -> str:
    return f"members carry scheduling gates of other systems: {', '.join(gates)}"


def shortfall(parts: Demand, placed: int, counts: Sequence[tuple[str, int]], limit: int) -> str:
    text = f"needs {demand(parts)}; best placement fits {placed}"
    return f"{text}: {node_counts(counts, limit)}" if counts else text


def no_eligible_node(parts: Demand, why: str) -> str:
    return f"needs {demand(parts)}; {why}"


def missing_resource(parts: Demand, names: Sequence[str]) -> str:
    return f"needs {demand(parts)}; no node offers {', '.join(names)}"


def too_big_for_any_node(parts: Demand, pod: str, largest: str) -> str:
    return f"needs {demand(parts)}; no node can ever hold a pod of {pod} (largest node: {largest})"


def too_big_for_cluster(parts: Demand, most: int) -> str:
    return f"needs {demand(parts)}; even an empty cluster holds only {most}"


# ---- a gang held to one topology domain (Gang.required_topology) --------------------------------


def topology_unlabelled(parts: Demand, key: str) -> str:
    return f"needs {demand(parts)} inside one {key} domain; no node is labelled {key}"


def topology_domain_gone(parts: Demand, key: str, value: str) -> str:
    """An admitted gang's new members must join it in its domain, whose nodes are gone."""
    return f"needs {demand(parts)} inside {key}={value}, where the gang runs; no node is labelled so any more"


def too_big_for_any_domain(parts: Demand, key: str, best: str, most: int) -> str:
    return (
        f"needs {demand(parts)} inside one {key} domain; no {key} domain could ever hold them "
        f"(the largest, {best}, holds {most})"
    )


def _cluster_room(resource: str, cluster: int, cluster_fits: bool) -> str:
    amount = f"{format_amount(resource, cluster)} {resource}"
    if cluster_fits:
        return f"the cluster as a whole has {amount} free and would fit it across domains"
    return f"the cluster as a whole has {amount} free"


def no_single_domain(
    parts: Demand,
    key: str,
    resource: str,
    need: int,
    best: str | None,
    best_free: int,
    cluster: int,
    cluster_fits: bool,
) -> str:
    """``needs 16 pods × 1 nvidia.com/gpu inside one topology.kubernetes.io/rack domain; no single
    topology.kubernetes.io/rack domain has 16 free nvidia.com/gpu; the best, rack-3, has 12; ...``"""
    text = (
        f"needs {demand(parts)} inside one {key} domain; no single {key} domain has "
        f"{format_amount(resource, need)} free {resource}"
    )
    if best is not None:
        text += f"; the best, {best}, has {format_amount(resource, best_free)}"
    return f"{text}; {_cluster_room(resource, cluster, cluster_fits)}"


def no_room_in_home_domain(
    parts: Demand, key: str, value: str, resource: str, free: int, cluster: int, cluster_fits: bool
) -> str:
    """New members of an admitted gang held to one domain must join it in the domain it runs in."""
    return (
        f"needs {demand(parts)} inside {key}={value}, where the gang runs; it has "
        f"{format_amount(resource, free)} {resource} free; {_cluster_room(resource, cluster, cluster_fits)}"
    )


def no_single_domain_fit(parts: Demand, key: str, best: str, fits: int, cluster_fits: bool) -> str:
    """Enough free room in a domain, but not in pieces its pods fit."""
    text = (
        f"needs {demand(parts)} inside one {key} domain; no single {key} domain has room for all of "
        f"them: the best, {best}, fits {fits}"
    )
    return f"{text}; the cluster as a whole would fit them across domains" if cluster_fits else text


def fix_free_in_domain(amount: str, resource: str, key: str, value: str, held_by: str) -> str:
    """What explain suggests for a gang held to one domain: ``free 4 nvidia.com/gpu in
    topology.kubernetes.io/rack=rack-3 (held now by ...)``."""
    return f"free {amount} {resource} in {key}={value} (held now by {held_by})"


def fix_add_domain(key: str, like: str, nodes: int, free: str, resource: str) -> str:
    """``add a topology.kubernetes.io/rack domain like rack-3 with 16 free nvidia.com/gpu (2 nodes
    like its own)``: the fewest of the copied domain's nodes that let the gang start."""
    count = "1 node" if nodes == 1 else f"{nodes} nodes"
    return f"add a {key} domain like {like} with {free} free {resource} ({count} like its own)"


# ---- a gang's topology request (core/topology.py) ----------------------------------------------


def topology_unknown(name: str, known: Sequence[str]) -> str:
    return f"names topology {name!r}, which the controller does not define (it defines: {', '.join(known)})"


def topology_conflict(what: str, first: str, first_from: str, second: str, second_from: str) -> str:
    """Two sources ask for different things: ``required level topology.kubernetes.io/rack
    (phalanx.io/topology-required) conflicts with cloud.com/block (kueue.x-k8s.io/...)``."""
    return f"{what} {first} ({first_from}) conflicts with {second} ({second_from}); set one of them"


# The systems a gang's topology request is read from, as conflicts name them.
SOURCE_PHALANX = "Phalanx"
SOURCE_KUEUE = "Kueue annotations"
SOURCE_KAI = "KAI topologyConstraint"
SOURCE_VOLCANO = "Volcano networkTopology"
# Phalanx's own places, told apart when they disagree among themselves.
SOURCE_PODGROUP_SPEC = "PodGroup spec, or the native PodGroup's schedulingConstraints"
SOURCE_PODGROUP_ANNOTATIONS = "phalanx.io annotations on the PodGroup"
SOURCE_MEMBER_ANNOTATIONS = "phalanx.io annotations on its pods"


def source_on_pod(annotation: str, pod: str) -> str:
    """One member's annotation, when members disagree (their pod templates differ)."""
    return f"{annotation} on pod {pod}"


def tier_invalid(tier: int, name: str, levels: Sequence[str]) -> str:
    """Volcano's highestTierAllowed N is the N-th level of the gang's topology that nodes carry,
    narrowest first."""
    if tier < 1:
        return "Volcano networkTopology highestTierAllowed must be a positive integer"
    if not levels:
        return (
            f"Volcano networkTopology highestTierAllowed {tier}: no node carries a level of topology {name}"
        )
    return (
        f"Volcano networkTopology highestTierAllowed {tier}: the nodes carry {_plural(len(levels), 'level')} "
        f"of topology {name} to count tiers in ({', '.join(levels)}, narrowest first)"
    )


def preferred_unlabelled(key: str) -> str:
    """An admitted gang whose preferred level no node carries: said, not silently dropped."""
    return f"no node is labelled {key}, the preferred level: placed as if none were preferred"


def tier_conflict(required: bool, key: str, tier: int, tier_key: str) -> str:
    """A Volcano tier (hard: ``required``, soft: preferred) that names another level than one set
    another way."""
    what = "required level" if required else "preferred level"
    return (
        f"{what} {key} conflicts with Volcano networkTopology highestTierAllowed {tier} "
        f"({tier_key}); set one of them"
    )


def topologies_malformed(entry: str) -> str:
    return f"{entry!r}: each topology is name=key,key,... with a name of its own"


def topology_key_twice(levels: str) -> str:
    return f"{levels!r}: a node label key appears twice"


def slices_of_one_shape(kinds: int) -> str:
    return (
        f"topology slices are cut from members that all ask the same; this gang's members ask "
        f"{kinds} different ways (requests, node selector, affinity or tolerations)"
    )


def slice_size_not_a_number() -> str:
    return (
        "the slice size (phalanx.io/topology-slice-size, kueue.x-k8s.io/podset-slice-size) "
        "is not a whole number"
    )


def slice_incomplete() -> str:
    return (
        "a slice needs both a level (phalanx.io/topology-slice-required) and a size "
        "(phalanx.io/topology-slice-size)"
    )


def slice_not_dividing(size: int, min_member: int) -> str:
    return f"slice size {size} does not divide the gang's {min_member} members"


def slice_wider_than_gang(slice_key: str, required: str) -> str:
    return f"slices must be inside one {slice_key} domain, a level wider than the gang's required {required}"


def slices_shortfall(
    parts: Demand, slices: int, size: int, key: str, within: str | None, fitting: int
) -> str:
    """``needs 32 pods × 1 nvidia.com/gpu in 4 slices of 8, each inside one nvidia.com/gpu.clique
    domain; only 3 such slices fit now``."""
    where = f", all inside one {within} domain" if within else ""
    return (
        f"needs {demand(parts)} in {slices} slices of {size}, each inside one {key} domain{where}; "
        f"only {fitting} such slices fit now"
    )


def subgroups_shortfall(parts: Demand, subgroups: int, within: str | None, fitting: int) -> str:
    """KAI subgroups with a required level of their own: ``needs 8 pods × 4 nvidia.com/gpu with 2
    subgroups each inside one domain of its own level; only 1 of them fits now``."""
    where = f", all inside one {within} domain" if within else ""
    plural = "subgroup" if subgroups == 1 else "subgroups"
    fit = "fits" if fitting == 1 else "fit"
    return (
        f"needs {demand(parts)} with {subgroups} {plural} each inside one domain of its own "
        f"level{where}; only {fitting} of them {fit} now"
    )


def held_in_domain(key: str, value: str) -> str:
    """What explain says of a placed gang: the domain that holds it."""
    return f"every member inside {key}={value}"


def requests_text(requests: Sequence[tuple[str, int]]) -> str:
    shown = [f"{format_amount(name, amount)} {name}" for name, amount in requests if name != "pods"]
    return ", ".join(shown) if shown else "no resources"


def timed_out(text: str, timeout: float) -> str:
    return f"schedule timeout of {_duration(timeout)} passed; {text}"


def reserved(waited: float, nodes: Sequence[str], limit: int, text: str) -> str:
    return (
        f"waiting for {_duration(waited)}; reserved {_plural(len(nodes), 'node')} "
        f"({node_list(nodes, limit)}) until the pods there finish — {text}"
    )


def blocked(holder: str, text: str) -> str:
    return f"would fit, but that room is reserved for starving gang {holder}; {text}"


def preempting_wait(victims_left: int) -> str:
    return f"waiting for {_plural(victims_left, 'preempted pod')} to terminate"


def preempting(
    parts: Demand, victims: Sequence[tuple[str, int, int]], nodes: Sequence[str], limit: int
) -> str:
    """victims: (name, priority, pods)."""
    listed = ", ".join(
        f"{name} ({_plural(pods, 'pod')}, priority {prio})" for name, prio, pods in victims[:limit]
    )
    if len(victims) > limit:
        listed += f", … (+{len(victims) - limit} more)"
    pods = sum(v[2] for v in victims)
    return (
        f"preempting {_plural(pods, 'pod')} of lower priority: {listed}; "
        f"to place {demand(parts)} on {node_list(nodes, limit)}"
    )


def preemption_cost(evicted: int, gained: int, resource: str) -> str:
    """``evicts 64 nvidia.com/gpu for 16 gained``: what a preemption costs for what it buys."""
    return f"evicts {evicted} {resource} for {gained} gained"


def preempted_by(preemptor: str, priority: int, pods: int, gpus: int, resource: str, text: str) -> str:
    """The victim's side: who took its room, what it lost, and the preemptor's own account."""
    return (
        f"evicted whole ({_plural(pods, 'pod')}, {gpus} {resource}) to make room for {preemptor} "
        f"(priority {priority}): {text}"
    )


def preempted_pods_by(preemptor: str, priority: int, pods: int, gpus: int, resource: str, text: str) -> str:
    """The side of a gang with disruption mode Single: some of its pods went, the rest runs on."""
    return (
        f"lost {_plural(pods, 'pod')} ({gpus} {resource}) to make room for {preemptor} "
        f"(priority {priority}); disruption mode Single: the rest keeps running, and the lost members "
        f"rejoin it as room allows: {text}"
    )


def waiting_for_siblings(parent: str, ready: int, needed: int, details: Sequence[str]) -> str:
    text = f"{ready} of {needed} sibling groups of parent {parent} are ready"
    return f"{text} ({'; '.join(details)})" if details else text


def family_waits(parent: str, text: str) -> str:
    return f"with its sibling groups of parent {parent}: {text}"


# ---- admitted / rejected -----------------------------------------------------------------------


def admitted(counts: Sequence[tuple[str, int]], pinned: bool, limit: int) -> str:
    pods = sum(n for _, n in counts)
    where = node_counts(counts, limit)
    head = f"placed {_plural(pods, 'pod')} on {_plural(len(counts), 'node')}: {where}"
    return head if pinned else f"{head} (not pinned: the scheduler chooses)"


def grown(counts: Sequence[tuple[str, int]], waiting: int, limit: int) -> str:
    pods = sum(n for _, n in counts)
    text = f"admitted {_plural(pods, 'new member')}: {node_counts(counts, limit)}"
    return f"{text}; {waiting} more wait for room" if waiting else text


def short_of_members(missing: int, min_member: int, waiting: int) -> str:
    """An admitted gang whose workload has not created the members it is short of yet."""
    return (
        f"{_plural(missing, 'more member')} needed to reach {min_member}; {waiting} created so far: "
        "they start together once all exist"
    )


def short_of_room(missing: int, min_member: int, why: str) -> str:
    """An admitted gang whose missing members (scaled up, or lost) do not all fit now."""
    return f"{_plural(missing, 'more member')} needed to reach {min_member} wait to start together: {why}"


def family_admitted(parent: str, text: str) -> str:
    return f"admitted with its sibling groups of parent {parent}; {text}"


def unmodelled_note(pod: str, why: str) -> str:
    return f"{pod}: {why} not modelled, placed without a pin"


def invalid_min_member(min_member: int) -> str:
    return f"minMember is {min_member}; it must be at least 1"


def invalid_max_member(max_member: int, min_member: int) -> str:
    return f"maxMember {max_member} is below minMember {min_member}"


def invalid_creatable(creatable: int, min_member: int) -> str:
    return (
        f"minMember is {min_member} but the workload can only ever create {creatable} "
        f"{'member' if creatable == 1 else 'members'}"
    )


# ---- queues ------------------------------------------------------------------------------------


def queue_not_found(name: str) -> str:
    return f"queue {name} does not exist"


def queue_parent_missing(name: str, parent: str) -> str:
    return f"queue {name} has parent {parent}, which does not exist"


def queue_loop(name: str) -> str:
    return f"queue {name} is its own ancestor (its parents form a loop)"


def queue_not_leaf(name: str, children: Sequence[str]) -> str:
    return f"queue {name} has child queues ({', '.join(children)}); gangs go to a queue without children"


def queue_not_allowed(queue: str, namespace: str, allowed: Sequence[str], bound: bool) -> str:
    """``queue team-b is not granted to namespace team-a; it may use team-a, shared``. The admission
    policy phalanx-queue-grants says the same for a namespace bound to a queue."""
    head = f"queue {queue} is not granted to namespace {namespace}"
    if bound:
        return f"{head}; it may use {', '.join(allowed)}"
    granted = f"{', '.join(allowed)} and " if allowed else ""
    return f"{head}; it may use {granted}queues granted to no namespace"


def queue_limit(queue: str, leaf: str, resource: str, used: int, limit: int, need: int) -> str:
    """``queue team-a is at its limit: 8 of 8 nvidia.com/gpu; the gang needs 2``."""
    whose = f"queue {queue}" if queue == leaf else f"queue {queue} (parent of {leaf})"

    def amount(value: int) -> str:
        return format_amount(resource, value)

    if used >= limit:
        head = f"{whose} is at its limit: {amount(used)} of {amount(limit)} {resource}"
    else:
        head = f"{whose} would exceed its limit: {amount(used)} of {amount(limit)} {resource} in use"
    return f"{head}; the gang needs {amount(need)}"


def reclaiming(
    parts: Demand, victims: Sequence[tuple[str, str, int]], nodes: Sequence[str], limit: int
) -> str:
    """victims: (name, queue, pods)."""
    listed = ", ".join(
        f"{name} ({_plural(pods, 'pod')}, queue {queue})" for name, queue, pods in victims[:limit]
    )
    if len(victims) > limit:
        listed += f", … (+{len(victims) - limit} more)"
    pods = sum(v[2] for v in victims)
    return (
        f"reclaiming {_plural(pods, 'pod')} from queues above their fair share: {listed}; "
        f"to place {demand(parts)} on {node_list(nodes, limit)}"
    )


# ---- timers (core/timers.py) -------------------------------------------------------------------


def bind_timed_out(bound: int, min_member: int, timeout: float) -> str:
    return f"only {bound} of {min_member} admitted members bound within {timeout:.0f}s"


def degraded_too_long(running: int, min_member: int, timeout: float) -> str:
    return f"ran with {running} of {min_member} members for {timeout:.0f}s"


def not_admitted_within(timeout: float) -> str:
    return f"not admitted within {timeout:.0f}s"


# ---- what the controller did (Events of controller/pipeline/executor.py) -----------------------


def rolled_back(why: str, jobs: int, deleted: int, bare: Sequence[str]) -> str:
    text = (
        f"{why}; re-queued whole: suspended {jobs} Jobs until their pods are gone, "
        f"deleted {deleted} other owned members so their owners recreate them gated"
    )
    if bare:
        text += f"; bare pods are never deleted, left as they are: {', '.join(sorted(bare))}"
    return text


def gave_up(why: str, jobs: Sequence[str], deleted: int) -> str:
    return f"{why}; suspended Jobs: {', '.join(jobs) or 'none'}; deleted owned pods: {deleted}"


def preemption_dry_run(victims: str, text: str) -> str:
    return f"would evict: {victims}: {text}"


def evicting(victims: str, text: str) -> str:
    return f"evicting {victims}: {text}"


def preemption_refused(victims: str, refusal: str) -> str:
    return f"not preempting {victims}: {refusal}"


def on_podgroup(podgroup: str, text: str) -> str:
    """An Event about a PodGroup, told on the Workload that owns it."""
    return f"PodGroup {podgroup}: {text}"


# ---- members bound without an admission (controller/pipeline/bypass.py) ------------------------


def _bypass_state(ever_admitted: bool) -> str:
    return "admitted without these members" if ever_admitted else "never admitted"


def gate_bypassed(names: Sequence[str], ever_admitted: bool, min_member: int, gate: str) -> str:
    return (
        f"{len(names)} member(s) bound without Phalanx's admission ({_bypass_state(ever_admitted)}, "
        f"minMember {min_member}): {', '.join(names)}; their {gate} gate was removed by someone other "
        "than Phalanx (or they never had one)"
    )


def gate_bypassed_pod(node: str | None, gang: str, ever_admitted: bool, gate: str) -> str:
    return (
        f"bound to {node} without Phalanx's admission of gang {gang} ({_bypass_state(ever_admitted)}); "
        f"its {gate} gate was removed by someone other than Phalanx"
    )


# ---- the size a gang waits for (controller/pipeline/podgroups.py) ------------------------------


def size_source_workload(namespace: str, workload: str, group: str) -> str:
    return f"Workload {namespace}/{workload} (podGroup {group})"


def size_source_min_count(workload: str) -> str:
    return f"Workload {workload} minCount"


def size_source_native(namespace: str, name: str, group: str) -> str:
    """A native PodGroup (1.36+) the members name in spec.schedulingGroup; ``group``: its API group."""
    return f"PodGroup {namespace}/{name} ({group})"


def size_source_native_min_count(name: str) -> str:
    return f"PodGroup {name} minCount"


def size_source_native_basic(name: str) -> str:
    return f"PodGroup {name} basic policy (no gang)"


def size_source_declared() -> str:
    return "the members' declared size"


def size_source_workload_spec() -> str:
    return "the workload spec"


def size_source_podgroup(namespace: str, name: str, link: str) -> str:
    """``link``: how the members name it, e.g. ``label phalanx.io/pod-group``."""
    return f"PodGroup {namespace}/{name} (named by {link})"


def link_label(key: str) -> str:
    return f"label {key}"


def link_annotation(key: str) -> str:
    return f"annotation {key}"


def waiting_for_native_podgroup(source: str) -> str:
    return (
        f"waiting for {source}: the pods name it in spec.schedulingGroup.podGroupName but it does not "
        "exist yet; no member starts before the gang's size is known"
    )


def waiting_for_size(source: str, workload_named: bool, min_member_annotation: str) -> str:
    if workload_named:
        return (
            f"waiting for {source}: the pods name it in spec.workloadRef but it does not exist "
            "(or has no such podGroup) yet; no member starts before the gang's size is known"
        )
    return (
        f"waiting for {source}: it does not exist yet; create it, or set {min_member_annotation} on "
        "the workload. No member starts before the gang's size is known"
    )


# ---- constraints the core does not model (controller/api/records.py) ---------------------------


def unmodelled(pod_affinity: bool, pod_anti_affinity: bool, topology_spread: bool) -> str | None:
    """What a pod asks that placement does not model, or None: ``inter-pod affinity and topology spread``."""
    parts = [
        text
        for present, text in (
            (pod_affinity, "inter-pod affinity"),
            (pod_anti_affinity, "inter-pod anti-affinity"),
            (topology_spread, "topology spread"),
        )
        if present
    ]
    return " and ".join(parts) or None


# ---- the process's health (controller/runtime/app.py) ------------------------------------------


def leadership_lost() -> str:
    return "leadership lost"


def informers_not_synced() -> str:
    return "informers not synced"


# ---- a PodGroup's status (controller/pipeline/status.py) ---------------------------------------


def members_succeeded(succeeded: int) -> str:
    return f"{succeeded} members succeeded"


def members_running(running: int) -> str:
    return f"{running} members running"


def members_failed(failed: int) -> str:
    return f"{failed} members failed"


def members_bound(scheduled: int) -> str:
    return f"{scheduled} members bound to nodes"


def bound_of(scheduled: int, min_member: int) -> str:
    return f"{scheduled} of {min_member} members bound"


def running_short(running: int, text: str) -> str:
    """An admitted gang at its old size whose added members wait: ``4 members running; …``."""
    return f"{running} members running; {text}"


def degraded(running: int, min_member: int, since: str, text: str | None) -> str:
    """``since``: an RFC 3339 time; ``text``: why the missing members cannot start, if known."""
    head = (
        f"{running} of {min_member} members running since {since}; "
        "the rest are gone (node drained, pod evicted) and no replacement could be placed"
    )
    return f"{head}: {text}" if text else head


def whole() -> str:
    return "every member the gang needs is running or done"


# ---- a member whose requests cannot be read (core/requests.py, controller/api/records.py) ------


def container(name: object, init: bool) -> str:
    return f"init container {name}" if init else f"container {name}"


def limits_of(where: str) -> str:
    return f"{where} limits"


def requests_of(where: str) -> str:
    return f"{where} requests"


def not_a_resource_map(where: str, value: object) -> str:
    return f"{where}: expected a map of resource quantities, got {value!r}"


def bad_quantity(where: str, error: object) -> str:
    return f"{where}: {error}"


def negative_amount(where: str, resource: str) -> str:
    return f"{where}: {resource} must not be negative"


def resources_not_a_map(where: str) -> str:
    return f"{where}: resources must be a map"


def containers_not_a_list(key: str) -> str:
    return f"spec.{key} must be a list of containers"


def invalid_pod(namespace: object, name: object, error: object) -> str:
    return f"pod {namespace}/{name}: {error}"


# ---- the scheduling condition of a native PodGroup (scheduling.k8s.io, 1.36+) -----------------------


def native_held(message: str) -> str:
    """While Phalanx holds the group's members at its gate (the scheduler cannot see them)."""
    return f"held whole at Phalanx's gate phalanx.io/gang: {message}"


def native_placed(members: int) -> str:
    return f"admitted whole by Phalanx: {members} members placed"


# ---- DRA devices (core/devices.py) ---------------------------------------------------------------
def devices_unproven(pod: str, why: str) -> str:
    return (
        f"waits: Phalanx cannot prove where the devices {pod} claims fit ({why}), "
        "so it admits nothing on a guess"
    )


def device_class_missing(name: str) -> str:
    return f"DeviceClass {name} does not exist"


def device_selector_failed(device_class: str, error: str) -> str:
    return f"a CEL selector for class {device_class} could not be evaluated: {error}"


def device_constraints_unmodelled(request: str) -> str:
    return f"request {request}: a constraint over several requests, or several constraints, is not modelled"


def device_claim_missing(name: str) -> str:
    return f"ResourceClaim {name} does not exist yet"


def device_template_missing(name: str) -> str:
    return f"ResourceClaimTemplate {name} does not exist yet"


def device_group_claim_not_made(group: str, claim: str) -> str:
    return f"the ResourceClaim of PodGroup {group}'s claim {claim} is not made yet"


def device_claim_not_node_local(name: str) -> str:
    return f"ResourceClaim {name} is allocated to devices no single node holds"


def device_claims_apart(pod: str) -> str:
    return f"{pod} names allocated claims on different nodes"


def device_admin_access(request: str) -> str:
    return f"request {request} asks for adminAccess, which is not modelled"


def device_request_unmodelled(request: str, what: str) -> str:
    return f"request {request} uses {what}, which is not modelled"


def device_claim_unmodelled(what: str) -> str:
    return f"the claim uses {what}, which is not modelled"


# What DRA features are not modelled, as the messages above name them.
DEVICE_TAINTS = "taints"
DEVICE_SHARED_COUNTERS = "shared counters"
DEVICE_CAPACITY_REQUESTS = "capacity requests"
DEVICE_TOLERATIONS = "device tolerations"
DEVICE_NO_EXACTLY = "no exactly request"
DEVICE_OTHER_CONSTRAINT = "a constraint other than matchAttribute or distinctAttribute"


def device_classes_overlap(device_class: str) -> str:
    return (
        f"DeviceClass {device_class} selects devices other DeviceClasses select too, "
        "across several of them, which is not modelled"
    )


def device_requests_overlap(device_class: str) -> str:
    return (
        f"requests of class {device_class} whose selectors or constraints differ but select some "
        "of the same devices are not modelled together: the gang waits while another such "
        "request is counted (one of its own, or another gang's until that gang's members are placed)"
    )


def device_allocation_mode(mode: str) -> str:
    return f"allocationMode {mode}"


def cel_not_bool(kind: str) -> str:
    return f"the expression gave {kind}, not a bool"


def cel_invalid_quantity(text: str) -> str:
    return f"invalid quantity {text!r}"


def cel_invalid_semver(text: str) -> str:
    return f"invalid semver {text!r}"


CEL_NOT_COMPARABLE = "not a quantity or a semver"
# ---- the cluster-autoscaler (ProvisioningRequests) ------------------------------------------------


def autoscaler_blind() -> str:
    return (
        "a cluster-autoscaler cannot see gated pods, so it adds no node for this gang; on a cluster "
        "scaled by the cluster-autoscaler, start the controller with --provisioning-requests "
        "best-effort-atomic (or check-capacity) to ask it for the whole gang's nodes "
        "(ProvisioningRequest); Karpenter and fixed node groups cannot be asked: room must appear "
        "by other means"
    )


def provisioning_requests_not_served() -> str:
    return (
        "the controller would ask the cluster-autoscaler for this gang's nodes, but the API server "
        "does not serve ProvisioningRequests (autoscaling.x-k8s.io/v1): install the "
        "cluster-autoscaler's ProvisioningRequest CRD and run it with --enable-provisioning-requests"
    )


def awaiting_own_capacity() -> str:
    return (
        "waits for the nodes asked for it: its ProvisioningRequest is not answered yet, and nodes "
        "that registered since it asked may be another gang's"
    )


def booked_nodes_held(text: str, nodes: Sequence[str], limit: int) -> str:
    return (
        f"{text}; {_plural(len(nodes), 'node')} registered since its ProvisioningRequest "
        f"({node_list(nodes, limit)}) held for it until it starts or its booking ends"
    )


def blocked_by_booking(holders: Sequence[str], text: str) -> str:
    return (
        f"would fit, but that room was provisioned for {_plural(len(holders), 'gang')} "
        f"({', '.join(holders[:3])}{', …' if len(holders) > 3 else ''}) by the cluster-autoscaler; {text}"
    )


def provisioning_condition(reason: str, message: str) -> str:
    return ": ".join(part for part in (reason, message.rstrip(".")) if part)


def not_the_gangs(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace}/{name} exists and is not controlled by the gang's PodGroup"


def provisioning_requested(name: str, class_name: str) -> str:
    return (
        f"asked the cluster-autoscaler for the whole gang's nodes (ProvisioningRequest {name}, {class_name})"
    )


def provisioning_accepted(name: str) -> str:
    return f"the cluster-autoscaler accepted ProvisioningRequest {name} and looks for the whole gang's nodes"


def provisioning_provisioned(name: str) -> str:
    return (
        f"the cluster-autoscaler provisioned the whole gang's nodes (ProvisioningRequest {name}); "
        "they are booked for it"
    )


def provisioning_not_found(name: str, why: str) -> str:
    detail = f" ({why})" if why else ""
    return (
        f"the cluster-autoscaler found no room for the whole gang (ProvisioningRequest {name}){detail}; "
        "it adds no node and tries again later"
    )


def provisioning_failed(name: str, why: str, retry_in: float) -> str:
    detail = f" ({why})" if why else ""
    return (
        f"the cluster-autoscaler failed ProvisioningRequest {name}{detail}; "
        f"Phalanx asks again in {_duration(retry_in)}"
    )


def provisioning_expired(name: str, why: str) -> str:
    detail = f" ({why})" if why else ""
    return f"the booking of ProvisioningRequest {name} ended before the gang started{detail}; asking again"


def with_provisioning(text: str, note: str) -> str:
    return f"{text}; {note}"


def provisioning_not_created(name: str, why: str) -> str:
    return (
        f"Phalanx could not create ProvisioningRequest {name} ({why.rstrip('.')}); "
        "the cluster-autoscaler was not asked for this gang's nodes"
    )


def too_many_pod_sets(shapes: int, limit: int) -> str:
    return (
        f"the gang's members come in {shapes} shapes, one pod set each, and a ProvisioningRequest "
        f"holds at most {limit}"
    )
