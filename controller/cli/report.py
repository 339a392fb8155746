"""What ``explain`` and ``top`` say, as plain data (JSON/YAML) and as text. Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from controller.cli.cluster import ClusterState
from controller.cli.gpu_counts import GpuCounts
from controller.cli.planner_settings import SettingsUsed
from controller.cli.render import duration, table
from controller.core import (
    AddDomain,
    AddNodes,
    Admit,
    Decision,
    Explanation,
    FreeInDomain,
    FreeOnNode,
    Gang,
    GangKey,
    Plan,
    PlanningPass,
    Pod,
    Preempt,
    Reason,
    Reject,
    Remove,
    Short,
    Wait,
    explain,
    held_in,
    is_live,
    messages,
)
from controller.pipeline import status
from shared.podgroup import ConditionType, Phase, PodGroupStatus
from shared.quantities import format_amount

# ---- shared ------------------------------------------------------------------------------------


def decision_data(decision: Decision | None) -> dict[str, Any]:
    if decision is None:
        return {"action": "None", "reason": None, "message": "no decision: nothing of it waits to start"}
    action = type(decision).__name__
    reason: str | None = None
    if isinstance(decision, Preempt):
        reason = "Preempting"
    elif isinstance(decision, (Wait, Short, Reject)):
        reason = decision.reason.value
    data: dict[str, Any] = {"action": action, "reason": reason, "message": decision.message}
    if isinstance(decision, Wait) and decision.timed_out:
        data["timedOut"] = True
    return data


def gpus_held(members: Iterable[Pod], counts: GpuCounts) -> int:
    """GPUs (or the devices counted as GPUs) of the gang's members that sit on a node now."""
    return sum(counts.gpus(pod) for pod in members if pod.node_name and is_live(pod))


def _member_state(pod: Pod) -> str:
    if pod.terminating:
        return "Terminating"
    if pod.gated:
        return "Gated"
    if pod.foreign_gates:
        return "ForeignGates"
    return pod.phase


MEMBERS_SHOWN = 16
# Waits that more room could end (the others wait for members, gates, siblings, a valid spec).
ROOM_REASONS = frozenset(
    {
        Reason.INSUFFICIENT_CAPACITY,
        Reason.UNSCHEDULABLE,
        Reason.BLOCKED_BY_RESERVATION,
        Reason.RESERVED,
        Reason.PREEMPTING,
    }
)

# Where an explanation comes from: the plugin's own planning pass, or (when the user may not read
# what the planner needs) what the controller wrote on the PodGroup's status.
PLANNER, PODGROUP_STATUS = "planner", "podGroupStatus"

# ---- explain -----------------------------------------------------------------------------------


def _holders_data(holders: Sequence[tuple[str, int, str | None]]) -> list[dict[str, Any]]:
    """The pods holding what a fix frees, as the JSON output names them."""
    return [{"pod": name, "amount": amount, "gang": gang} for name, amount, gang in holders]


def _fix_data(
    fix: FreeOnNode | FreeInDomain | AddNodes | AddDomain | Remove, resource: str
) -> dict[str, Any]:
    if isinstance(fix, FreeOnNode):
        return {
            "change": "FreeOnNode",
            "node": fix.node,
            "resource": fix.resource,
            "amount": fix.amount,
            "heldBy": _holders_data(fix.holders),
        }
    if isinstance(fix, FreeInDomain):
        return {
            "change": "FreeInDomain",
            "level": fix.key,
            "domain": fix.value,
            "resource": fix.resource,
            "amount": fix.amount,
            "heldBy": _holders_data(fix.holders),
        }
    if isinstance(fix, AddDomain):
        return {
            "change": "AddDomain",
            "level": fix.key,
            "like": fix.like,
            "nodes": fix.nodes,
            "resource": fix.resource,
            "free": format_amount(fix.resource, fix.free),
        }
    if isinstance(fix, AddNodes):
        return {
            "change": "AddNodes",
            "count": fix.count,
            "like": fix.like,
            "allocatable": {name: format_amount(name, amount) for name, amount in fix.allocatable},
        }
    return {
        "change": "Remove",
        "victims": [
            {
                "name": victim.label,
                "kind": "gang" if victim.gang is not None else "pod",
                "priority": victim.priority,
                "pods": victim.pods,
                "lowerPriority": victim.lower_priority,
            }
            for victim in fix.victims
        ],
    }


def _member_rows(
    pods: Iterable[Pod], counts: GpuCounts, admitted: Callable[[Pod], bool | None]
) -> list[dict[str, Any]]:
    """One row per member, by name: the same shape whether planned or read from the status. Its GPUs
    are keyed by the resource counted as GPUs; on a cluster with DeviceClasses, ``devices`` adds
    what it claims (or holds) of the other classes."""
    rows = []
    for pod in sorted(pods, key=lambda pod: pod.name):
        row: dict[str, Any] = {
            "name": pod.name,
            "state": _member_state(pod),
            "node": pod.node_name,
            counts.resource: counts.gpus(pod),
            "admitted": admitted(pod),
        }
        if counts.device_resources:
            row["devices"] = counts.devices(pod)
        rows.append(row)
    return rows


def explain_data(state: ClusterState, key: GangKey) -> dict[str, Any]:
    view = state.views[key]
    explanation: Explanation = explain(state.snapshot, key, state.config)
    gang = explanation.gang
    podgroup = view.podgroup
    resource = state.gpus.resource
    members = _member_rows(view.members, state.gpus, lambda pod: pod.uid in gang.admitted)
    notes = []
    if key in state.synthesized:
        notes.append("its PodGroup does not exist yet: shown as the controller would create it")
    data: dict[str, Any] = {
        "gang": str(key),
        "source": PLANNER,
        "podGroup": {
            "kind": f"{podgroup.rt.plural}.{podgroup.rt.group}",
            "minMember": gang.min_member,
            "maxMember": gang.max_member,
            "phase": podgroup.status.get("phase"),
            "message": podgroup.status.get("message"),
            "topologyRequired": gang.required_topology,
            "disruptionMode": gang.disruption_mode.value,
            **_topology_data(state, gang, explanation.decision),
        },
        "priority": gang.priority,
        "localPriority": gang.local_priority,
        "queue": gang.queue,
        "placement": gang.placement.value,
        "waiting": None if view.gang.admitted_at is not None else state.now - gang.wait_start,
        "members": members,
        "order": {
            "position": explanation.position,
            "of": explanation.of,
            "ahead": [str(other) for other in explanation.ahead],
        },
        "decision": decision_data(explanation.decision),
        "partial": None,
        "fixes": [_fix_data(fix, resource) for fix in explanation.fixes],
        "notes": notes,
        "autoscaler": autoscaler_data(podgroup.status),
    }
    if explanation.partial is not None:
        partial = explanation.partial
        data["partial"] = {"needed": partial.needed, "placed": partial.placed, "nodes": dict(partial.nodes)}
    return data


def _topology_data(state: ClusterState, gang: Gang, decision: Decision | None) -> dict[str, Any]:
    """The rest of the gang's topology request and the domain that holds it (where its members run
    or the plan puts them), only what is set."""
    request = gang.topology
    out: dict[str, Any] = {}
    if request.name:
        out["topology"] = request.name
    if request.preferred:
        out["topologyPreferred"] = request.preferred
    if request.slice_key:
        out["topologySlice"] = {"key": request.slice_key, "size": request.slice_size}
    placed = [m.node_name for m in gang.members if m.node_name and is_live(m)]
    placed += [n for n in gang.admitted.values() if n]
    if isinstance(decision, Admit):
        placed += list(decision.booked.values())
    labels = {node.name: node.labels for node in state.snapshot.nodes}
    held = held_in(state.config, gang, labels, placed)
    if held is not None:
        out["topologyHeldIn"] = f"{held[0]}={held[1]}"
    return out


def autoscaler_data(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The PodGroup's CapacityRequested condition: its ProvisioningRequest (named in the message)
    and where it stands, or that the cluster-autoscaler cannot see the gang (None: nothing said)."""
    found = PodGroupStatus.from_json(status).condition(ConditionType.CAPACITY_REQUESTED)
    if found is None:
        return None
    return {
        "requested": found.get("status") == "True",
        "reason": found.get("reason"),
        "message": found.get("message"),
    }


def status_explain_data(state: ClusterState, key: GangKey) -> dict[str, Any]:
    """What the controller wrote on the gang's PodGroup, in ``explain_data``'s shape: for users who
    may not read every namespace's pods, without which no plan can be made. Planner-only parts
    (order, partial placement, fixes) are empty."""
    record = state.store.podgroup(key)
    status = record.status if record is not None else {}
    members = _member_rows(state.store.members(key), state.gpus, lambda pod: None)
    return {
        "gang": str(key),
        "source": PODGROUP_STATUS,
        "podGroup": {
            "kind": f"{record.rt.plural}.{record.rt.group}" if record is not None else None,
            "minMember": record.spec.min_member if record is not None else None,
            "maxMember": record.spec.max_member if record is not None else None,
            "phase": status.get("phase"),
            "message": status.get("message"),
            "topologyRequired": record.spec.topology_required if record is not None else None,
            "disruptionMode": record.spec.disruption_mode if record is not None else None,
        },
        "priority": None,
        "localPriority": None,
        "queue": record.spec.queue if record is not None else None,
        "placement": None,
        "waiting": None,
        "members": members,
        "order": None,
        "decision": {"action": None, "reason": status.get("reason"), "message": status.get("message")},
        "partial": None,
        "fixes": [],
        "notes": [],
        "autoscaler": autoscaler_data(status),
    }


def _held_by(holders: list[dict[str, Any]]) -> str:
    """Holders grouped by gang: "gang team/small (3 pods, 3)", other pods one by one."""
    groups: dict[str, list[int]] = {}
    for holder in holders:
        name = f"gang {holder['gang']}" if holder["gang"] else f"pod {holder['pod']}"
        groups.setdefault(name, []).append(holder["amount"])
    shown = [
        f"{name} ({len(amounts)} pods, {sum(amounts)})" if len(amounts) > 1 else f"{name} ({amounts[0]})"
        for name, amounts in list(groups.items())[:6]
    ]
    more = f", … (+{len(groups) - 6} more)" if len(groups) > 6 else ""
    return ", ".join(shown) + more


def _fix_text(fix: dict[str, Any]) -> str:
    if fix["change"] == "FreeOnNode":
        held_by = _held_by(fix["heldBy"])
        return f"free {fix['amount']} {fix['resource']} on node {fix['node']} (held now by {held_by})"
    if fix["change"] == "FreeInDomain":
        amount = format_amount(fix["resource"], fix["amount"])
        held_by = _held_by(fix["heldBy"])
        return messages.fix_free_in_domain(amount, fix["resource"], fix["level"], fix["domain"], held_by)
    if fix["change"] == "AddDomain":
        return messages.fix_add_domain(fix["level"], fix["like"], fix["nodes"], fix["free"], fix["resource"])
    if fix["change"] == "AddNodes":
        allocatable = ", ".join(
            f"{name} {amount}" for name, amount in fix["allocatable"].items() if name != "pods"
        )
        nodes = "1 node" if fix["count"] == 1 else f"{fix['count']} nodes"
        return f"add {nodes} like {fix['like']} ({allocatable})"
    parts = []
    for victim in fix["victims"]:
        how = "lower priority: Phalanx may preempt it" if victim["lowerPriority"] else "not lower priority"
        parts.append(
            f"{victim['kind']} {victim['name']} ({victim['pods']} pods, priority {victim['priority']}; {how})"
        )
    return "end " + ", ".join(parts)


def explain_text(data: dict[str, Any]) -> str:
    if data["source"] == PODGROUP_STATUS:
        return "\n".join(
            [
                *_status_lines(data),
                *_member_lines(data["members"]),
                *(f"Note:       {note}" for note in data["notes"]),
            ]
        )
    return "\n".join(
        [
            *_gang_lines(data),
            *_member_lines(data["members"]),
            *_decision_lines(data),
            *(f"Note:       {note}" for note in data["notes"]),
        ]
    )


def _gang_lines(data: dict[str, Any]) -> list[str]:
    """The PodGroup, its status, priority, how long it waits and where it is in the order."""
    podgroup = data["podGroup"]
    size = f"minMember {podgroup['minMember']}" + (
        f", maxMember {podgroup['maxMember']}" if podgroup["maxMember"] else ""
    )
    lines = [
        f"Gang:       {data['gang']} (PodGroup {podgroup['kind']}, {size})",
        *_requirement_lines(podgroup),
    ]
    if podgroup["phase"]:
        message = f": {podgroup['message']}" if podgroup["message"] else ""
        lines.append(f"Status:     {podgroup['phase']}{message}")
    own = f" (own {data['localPriority']})" if data["localPriority"] is not None else ""
    queue = f", queue {data['queue']}" if data["queue"] else ""
    lines.append(f"Priority:   {data['priority']}{own}{queue}; placement {data['placement']}")
    lines.extend(_autoscaler_lines(data))
    if data["waiting"] is not None:
        lines.append(f"Waiting:    {duration(data['waiting'])}")
    order = data["order"]
    ahead = order["ahead"]
    shown = ", ".join(ahead[:6]) + (" …" if len(ahead) > 6 else "")
    behind = f"; waiting ahead of it: {shown}" if ahead else ""
    lines.append(f"Order:      {order['position']} of {order['of']}{behind}")
    return lines


def _requirement_lines(podgroup: dict[str, Any]) -> list[str]:
    """What the gang asks of its placement and of preemption, when it asks anything."""
    lines = []
    if podgroup.get("topologyRequired"):
        lines.append(f"Topology:   every member inside one {podgroup['topologyRequired']} domain (required)")
    if podgroup.get("topologyPreferred"):
        lines.append(f"Topology:   inside one {podgroup['topologyPreferred']} domain if one fits (preferred)")
    if podgroup.get("topologySlice"):
        piece = podgroup["topologySlice"]
        lines.append(f"Topology:   every {piece['size']} members inside one {piece['key']} domain (slices)")
    if podgroup.get("topology"):
        lines.append(f"Topology:   levels of topology {podgroup['topology']}")
    if podgroup.get("topologyHeldIn"):
        lines.append(f"Held in:    {podgroup['topologyHeldIn']} (the narrowest domain holding every member)")
    if podgroup.get("disruptionMode") == "Single":
        lines.append("Disruption: Single (preemption may take single pods of it)")
    return lines


def _status_lines(data: dict[str, Any]) -> list[str]:
    """The PodGroup and the reason and message the controller wrote on it."""
    podgroup, decision = data["podGroup"], data["decision"]
    if podgroup["kind"] is None:
        return [f"Gang:       {data['gang']} (no PodGroup yet: the controller has not planned it)"]
    lines = [
        f"Gang:       {data['gang']} (PodGroup {podgroup['kind']}, minMember {podgroup['minMember']})",
        *_requirement_lines(podgroup),
    ]
    said = " ".join(part for part in (podgroup["phase"], decision["reason"]) if part) or "no status yet"
    message = f": {decision['message']}" if decision["message"] else ""
    lines.append(f"Controller: {said}{message}")
    if data["queue"]:
        lines.append(f"Queue:      {data['queue']}")
    lines.extend(_autoscaler_lines(data))
    return lines


def _autoscaler_lines(data: dict[str, Any]) -> list[str]:
    """The gang's ProvisioningRequest and where it stands (--provisioning-requests)."""
    said = data.get("autoscaler")
    if not said:
        return []
    return [f"Autoscaler: {said['reason']}: {said['message']}"]


def _member_lines(members: list[dict[str, Any]]) -> list[str]:
    """How many members in which state, and the first MEMBERS_SHOWN of them as a table."""
    counts: dict[str, int] = {}
    for member in members:
        counts[member["state"]] = counts.get(member["state"], 0) + 1
    summary = ", ".join(f"{count} {state}" for state, count in sorted(counts.items()))
    lines = [f"Members:    {len(members)}" + (f" ({summary})" if summary else "")]
    columns = [("name", "NAME"), ("state", "STATE"), ("node", "NODE")]
    # The GPU column is keyed by the resource counted as GPUs (nvidia.com/gpu, or a DeviceClass).
    gpu_key = next((key for key in members[0] if key not in MEMBER_FIELDS), None) if members else None
    if gpu_key:
        columns.append((gpu_key, "GPUS"))
    shown = [{**m, "devices": _devices_text(m.get("devices"))} for m in members[:MEMBERS_SHOWN]]
    if any(row["devices"] for row in shown):
        columns.append(("devices", "DEVICES"))
    lines.extend("  " + line for line in table(shown, columns).splitlines())
    if len(members) > MEMBERS_SHOWN:
        lines.append(f"  … (+{len(members) - MEMBERS_SHOWN} more; -o yaml lists all)")
    return lines


# Every key of a member row but its GPUs (keyed by the resource's name).
MEMBER_FIELDS = frozenset({"name", "state", "node", "admitted", "devices"})


def _devices_text(devices: Mapping[str, int] | None) -> str:
    """``gpu.example.com 2, nic.example.com 1``: a member's devices of other classes."""
    return ", ".join(f"{name} {count}" for name, count in (devices or {}).items())


def _decision_lines(data: dict[str, Any]) -> list[str]:
    """The decision, the best partial placement, and what would make the gang start."""
    decision = data["decision"]
    reason = decision["reason"]
    verdict = decision["action"] + (f" {reason}" if reason and reason != decision["action"] else "")
    lines = [f"Decision:   {verdict}: {decision['message']}"]
    if data["partial"]:
        partial = data["partial"]
        where = ", ".join(f"{node} {count}" for node, count in partial["nodes"].items()) or "nowhere"
        lines.append(f"Best now:   {partial['placed']} of {partial['needed']} members fit ({where})")
    ahead = data["order"]["ahead"]
    if data["fixes"]:
        lines.append("It would start if you (each checked by re-planning):")
        lines.extend(f"  - {_fix_text(fix)}" for fix in data["fixes"])
    elif decision["action"] == "Wait" and reason in ROOM_REASONS:
        lines.append(
            "No single change searched (GPUs freed on one node or in one domain it is held to, up to "
            "64 new nodes like one it may use, a new domain like one of its own, running gangs ended) "
            "starts it" + (f" ahead of the {len(ahead)} gangs waiting before it." if ahead else ".")
        )
    elif decision["action"] == "Wait":
        lines.append("Room is not what it waits for (see the decision).")
    return lines


# ---- top ---------------------------------------------------------------------------------------


def top_data(state: ClusterState, namespace: str | None) -> dict[str, list[dict[str, Any]]]:
    """Every gang (of ``namespace``, or all) in the planner's order with what it is doing, and every
    queue as the pass reports it (GPUs; queues are cluster-wide)."""
    planning = PlanningPass(state.snapshot, state.config)
    order = list(planning.state.gangs)  # the pass's own order (queues, when there are any, re-rank it)
    the_plan = planning.run()
    gangs = [
        _gang_row(state, position, gang, the_plan.for_gang(gang.key))
        for position, gang in enumerate(order, start=1)
        if namespace is None or gang.key.namespace == namespace
    ]
    return {"gangs": gangs, "queues": _queue_rows(state, the_plan)}


def status_top_data(state: ClusterState, namespace: str) -> dict[str, list[dict[str, Any]]]:
    """``top_data``'s shape from what the controller wrote on ``namespace``'s PodGroups (no order, no
    queue accounting: those need every namespace's pods)."""
    gangs = []
    for key in sorted(state.store.gang_keys(), key=str):
        record = state.store.podgroup(key)
        if key.namespace != namespace or record is None:
            continue
        members = state.store.members(key)
        size = record.spec.min_member
        gangs.append(
            {
                "order": None,
                "namespace": key.namespace,
                "name": key.name,
                "queue": record.spec.queue,
                "priority": None,
                "size": None
                if size is None
                else str(size) + (f"-{record.spec.max_member}" if record.spec.max_member else ""),
                "members": sum(1 for pod in members if is_live(pod)),
                "state": record.status.get("phase"),
                "reason": record.status.get("reason"),
                "waitingSeconds": None,
                "gpusHeld": gpus_held(members, state.gpus),
                "message": record.status.get("message"),
            }
        )
    queues = [
        {
            "name": name,
            "parent": queue.parent,
            "gpuQuota": own.quota if (own := queue.resources.get(state.gpus.resource)) else 0,
            "gpuLimit": own.limit if own else None,
            "gpuAllocated": None,
            "gpuRequested": None,
            "gpuFairShare": None,
            "admittedGangs": None,
            "waitingGangs": None,
        }
        for name, queue in sorted(state.snapshot.queues.items())
    ]
    return {"gangs": gangs, "queues": queues}


def _gang_row(state: ClusterState, position: int, gang: Gang, decision: Decision | None) -> dict[str, Any]:
    """One line of ``top``: the gang's status as the controller would write it after this pass."""
    view = state.views[gang.key]
    wanted = status.desired(view, decision, state.now)
    admitted = wanted.phase not in (Phase.PENDING, Phase.FAILED)
    return {
        "order": position,
        "namespace": gang.key.namespace,
        "name": gang.key.name,
        "queue": gang.queue,
        "priority": gang.priority,
        "size": str(gang.min_member) + (f"-{gang.max_member}" if gang.max_member else ""),
        "members": sum(1 for pod in view.members if is_live(pod)),
        "state": wanted.phase and wanted.phase.value,
        "reason": wanted.reason,
        "waitingSeconds": None if admitted else round(state.now - gang.wait_start),
        "gpusHeld": gpus_held(view.members, state.gpus),
        "message": wanted.message,
    }


def _queue_rows(state: ClusterState, the_plan: Plan) -> list[dict[str, Any]]:
    """Every queue's GPU quota and limit, and what the pass allocated and found requested."""
    resource = state.gpus.resource
    rows = []
    for name in sorted(state.snapshot.queues):
        queue = state.snapshot.queues[name]
        own = queue.resources.get(resource)
        seen = the_plan.queues.get(name)
        rows.append(
            {
                "name": name,
                "parent": queue.parent,
                "gpuQuota": own.quota if own else 0,
                "gpuLimit": own.limit if own else None,
                "gpuAllocated": seen.allocated.get(resource, 0) if seen else 0,
                "gpuRequested": seen.requested.get(resource, 0) if seen else 0,
                "gpuFairShare": round(seen.fair_share.get(resource, 0.0), 2) if seen else 0.0,
                "admittedGangs": seen.admitted_gangs if seen else 0,
                "waitingGangs": seen.waiting_gangs if seen else 0,
            }
        )
    return rows


TOP_COLUMNS = [
    ("order", "#"),
    ("namespace", "NAMESPACE"),
    ("name", "GANG"),
    ("queue", "QUEUE"),
    ("priority", "PRIORITY"),
    ("size", "SIZE"),
    ("members", "MEMBERS"),
    ("state", "STATE"),
    ("reason", "REASON"),
    ("wait", "WAITING"),
    ("gpusHeld", "GPUS"),
]
QUEUE_COLUMNS = [
    ("name", "QUEUE"),
    ("parent", "PARENT"),
    ("gpuAllocated", "GPUS"),
    ("gpuFairShare", "FAIR SHARE"),
    ("gpuQuota", "QUOTA"),
    ("gpuLimit", "LIMIT"),
    ("gpuRequested", "REQUESTED"),
    ("admittedGangs", "ADMITTED"),
    ("waitingGangs", "WAITING"),
]


def top_text(data: dict[str, list[dict[str, Any]]]) -> str:
    gangs, queues = data["gangs"], data["queues"]
    tables = []
    if gangs:
        shown = [
            {**gang, "wait": duration(gang["waitingSeconds"]) if gang["waitingSeconds"] is not None else "-"}
            for gang in gangs
        ]
        with_queue = any(gang["queue"] for gang in gangs)
        columns = TOP_COLUMNS if with_queue else [column for column in TOP_COLUMNS if column[0] != "queue"]
        tables.append(table(shown, columns))
    else:
        tables.append("No gangs.")
    if queues:
        tables.append(table(queues, QUEUE_COLUMNS))
    return "\n\n".join(tables)


# ---- the settings planned with ---------------------------------------------------------------------


def settings_text(used: SettingsUsed) -> str:
    """One line: the planner settings, each with where it came from, and whose they are."""
    values = used.data()["values"]
    shown = ", ".join(
        f"{name} {'unset' if entry['value'] in (None, '') else str(entry['value']).lower()} ({entry['from']})"
        for name, entry in values.items()
    )
    return f"Planner settings from {used.source}: {shown}"
