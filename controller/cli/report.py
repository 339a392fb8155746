"""What ``explain`` and ``top`` say, as plain data (JSON/YAML) and as text. Pure."""

from __future__ import annotations

from typing import Any

from controller import status
from controller.cli.cluster import ClusterState
from controller.cli.render import duration, table
from controller.core.model import Decision, GangKey, Pod, Preempt, Reject, Wait
from controller.core.ordering import ordered
from controller.core.planner import plan
from controller.core.state import is_live
from controller.core.whatif import AddNodes, Explanation, FreeOnNode, Remove, explain
from controller.gangs import GangView
from shared.quantities import format_amount

# ---- shared ------------------------------------------------------------------------------------


def decision_data(decision: Decision | None) -> dict[str, Any]:
    if decision is None:
        return {"action": "None", "reason": None, "message": "no decision: nothing of it waits to start"}
    action = type(decision).__name__
    reason: str | None = None
    if isinstance(decision, Preempt):
        reason = "Preempting"
    elif isinstance(decision, (Wait, Reject)):
        reason = decision.reason.value
    out: dict[str, Any] = {"action": action, "reason": reason, "message": decision.message}
    if isinstance(decision, Wait) and decision.timed_out:
        out["timedOut"] = True
    return out


def _gpus(pod: Pod, resource: str) -> int:
    return pod.requests.get(resource, 0)


def gpus_held(view: GangView, resource: str) -> int:
    """GPUs of the gang's members that sit on a node now."""
    return sum(_gpus(p, resource) for p in view.members if p.node_name and is_live(p))


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
ROOM_REASONS = ("InsufficientCapacity", "Unschedulable", "BlockedByReservation", "Reserved", "Preempting")

# ---- explain -----------------------------------------------------------------------------------


def _fix_data(fix: FreeOnNode | AddNodes | Remove, resource: str) -> dict[str, Any]:
    if isinstance(fix, FreeOnNode):
        return {
            "change": "FreeOnNode",
            "node": fix.node,
            "resource": fix.resource,
            "amount": fix.amount,
            "heldBy": [{"pod": name, "amount": n, "gang": gang} for name, n, gang in fix.holders],
        }
    if isinstance(fix, AddNodes):
        return {
            "change": "AddNodes",
            "count": fix.count,
            "like": fix.like,
            "allocatable": {k: format_amount(k, v) for k, v in fix.allocatable},
        }
    return {
        "change": "Remove",
        "victims": [
            {
                "name": v.label,
                "kind": "gang" if v.gang is not None else "pod",
                "priority": v.priority,
                "pods": v.pods,
                "lowerPriority": v.lower_priority,
            }
            for v in fix.victims
        ],
    }


def explain_data(state: ClusterState, key: GangKey) -> dict[str, Any]:
    view = state.views[key]
    found: Explanation = explain(state.snapshot, key, state.config)
    gang = found.gang
    record = view.podgroup
    resource = state.config.gpu_resource
    members = [
        {
            "name": p.name,
            "state": _member_state(p),
            "node": p.node_name,
            resource: _gpus(p, resource),
            "admitted": p.uid in gang.admitted,
        }
        for p in sorted(view.members, key=lambda p: p.name)
    ]
    notes = []
    if key in state.synthesized:
        notes.append("its PodGroup does not exist yet: shown as the controller would create it")
    notes.append(f"planner settings from {state.config_source}")
    data: dict[str, Any] = {
        "gang": str(key),
        "podGroup": {
            "kind": f"{record.rt.plural}.{record.rt.group}",
            "minMember": gang.min_member,
            "maxMember": gang.max_member,
            "phase": record.status.get("phase"),
            "message": record.status.get("message"),
        },
        "priority": gang.priority,
        "localPriority": gang.local_priority,
        "queue": gang.queue,
        "placement": gang.placement.value,
        "waiting": None if view.gang.admitted_at is not None else state.now - gang.wait_start,
        "members": members,
        "order": {"position": found.position, "of": found.of, "ahead": [str(k) for k in found.ahead]},
        "decision": decision_data(found.decision),
        "partial": None,
        "fixes": [_fix_data(f, resource) for f in found.fixes],
        "notes": notes,
    }
    if found.partial is not None:
        p = found.partial
        data["partial"] = {"needed": p.needed, "placed": p.placed, "nodes": dict(p.nodes)}
    return data


def _fix_text(fix: dict[str, Any]) -> str:
    if fix["change"] == "FreeOnNode":
        # Holders grouped by gang: "gang team/small (3 pods, 3)", other pods one by one.
        groups: dict[str, list[int]] = {}
        for h in fix["heldBy"]:
            groups.setdefault(f"gang {h['gang']}" if h["gang"] else f"pod {h['pod']}", []).append(h["amount"])
        shown = [
            f"{name} ({len(amounts)} pods, {sum(amounts)})" if len(amounts) > 1 else f"{name} ({amounts[0]})"
            for name, amounts in list(groups.items())[:6]
        ]
        more = f", … (+{len(groups) - 6} more)" if len(groups) > 6 else ""
        return (
            f"free {fix['amount']} {fix['resource']} on node {fix['node']} "
            f"(held now by {', '.join(shown)}{more})"
        )
    if fix["change"] == "AddNodes":
        alloc = ", ".join(f"{k} {v}" for k, v in fix["allocatable"].items() if k != "pods")
        nodes = "1 node" if fix["count"] == 1 else f"{fix['count']} nodes"
        return f"add {nodes} like {fix['like']} ({alloc})"
    parts = []
    for v in fix["victims"]:
        how = "lower priority: Phalanx may preempt it" if v["lowerPriority"] else "not lower priority"
        parts.append(f"{v['kind']} {v['name']} ({v['pods']} pods, priority {v['priority']}; {how})")
    return "end " + ", ".join(parts)


def explain_text(data: dict[str, Any]) -> str:
    pg = data["podGroup"]
    size = f"minMember {pg['minMember']}" + (f", maxMember {pg['maxMember']}" if pg["maxMember"] else "")
    lines = [f"Gang:       {data['gang']} (PodGroup {pg['kind']}, {size})"]
    if pg["phase"]:
        lines.append(f"Status:     {pg['phase']}" + (f": {pg['message']}" if pg["message"] else ""))
    prio = f"{data['priority']}" + (
        f" (own {data['localPriority']})" if data["localPriority"] is not None else ""
    )
    queue = f", queue {data['queue']}" if data["queue"] else ""
    lines.append(f"Priority:   {prio}{queue}; placement {data['placement']}")
    if data["waiting"] is not None:
        lines.append(f"Waiting:    {duration(data['waiting'])}")
    order = data["order"]
    ahead = order["ahead"]
    behind = (
        f"; waiting ahead of it: {', '.join(ahead[:6])}" + (" …" if len(ahead) > 6 else "") if ahead else ""
    )
    lines.append(f"Order:      {order['position']} of {order['of']}{behind}")
    gpu_key = next((k for k in data["members"][0] if "/" in k), None) if data["members"] else None
    states: dict[str, int] = {}
    for m in data["members"]:
        states[m["state"]] = states.get(m["state"], 0) + 1
    summary = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
    lines.append(f"Members:    {len(data['members'])}" + (f" ({summary})" if summary else ""))
    columns = [("name", "NAME"), ("state", "STATE"), ("node", "NODE")]
    if gpu_key:
        columns.append((gpu_key, "GPUS"))
    shown = data["members"][:MEMBERS_SHOWN]
    lines.extend("  " + line for line in table(shown, columns).splitlines())
    if len(data["members"]) > MEMBERS_SHOWN:
        lines.append(f"  … (+{len(data['members']) - MEMBERS_SHOWN} more; -o yaml lists all)")
    d = data["decision"]
    verdict = d["action"] + (f" {d['reason']}" if d["reason"] and d["reason"] != d["action"] else "")
    lines.append(f"Decision:   {verdict}: {d['message']}")
    if data["partial"]:
        p = data["partial"]
        where = ", ".join(f"{n} {c}" for n, c in p["nodes"].items()) or "nowhere"
        lines.append(f"Best now:   {p['placed']} of {p['needed']} members fit ({where})")
    if data["fixes"]:
        lines.append("It would start if you (each checked by re-planning):")
        lines.extend(f"  - {_fix_text(fix)}" for fix in data["fixes"])
    elif d["action"] == "Wait" and d["reason"] in ROOM_REASONS:
        lines.append(
            "No single change searched (GPUs freed on one node, up to 64 new nodes like one it may "
            "use, running gangs ended) starts it"
            + (f" ahead of the {len(ahead)} gangs waiting before it." if ahead else ".")
        )
    elif d["action"] == "Wait":
        lines.append("Room is not what it waits for (see the decision).")
    lines.extend(f"Note:       {n}" for n in data["notes"])
    return "\n".join(lines)


# ---- top ---------------------------------------------------------------------------------------


def top_rows(state: ClusterState, namespace: str | None) -> list[dict[str, Any]]:
    """Every gang (of ``namespace``, or all), in the planner's order, with what it is doing."""
    decisions = {d.gang: d for d in plan(state.snapshot, state.config).decisions}
    resource = state.config.gpu_resource
    rows = []
    for i, gang in enumerate(ordered(state.snapshot.gangs), start=1):
        if namespace is not None and gang.key.namespace != namespace:
            continue
        view = state.views[gang.key]
        decision = decisions.get(gang.key)
        wanted = status.desired(view, decision, state.now)
        admitted = wanted["phase"] not in ("Pending", "Failed")
        live = sum(1 for p in view.members if is_live(p))
        size = str(gang.min_member) + (f"-{gang.max_member}" if gang.max_member else "")
        rows.append(
            {
                "order": i,
                "namespace": gang.key.namespace,
                "name": gang.key.name,
                "queue": gang.queue,
                "priority": gang.priority,
                "size": size,
                "members": live,
                "state": wanted["phase"],
                "reason": wanted["reason"],
                "waitingSeconds": None if admitted else round(state.now - gang.wait_start),
                "gpusHeld": gpus_held(view, resource),
                "message": wanted["message"],
                "action": None
                if isinstance(decision, Reject) or decision is None
                else type(decision).__name__,
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


def top_text(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No gangs."
    shown = [
        {**r, "wait": duration(r["waitingSeconds"]) if r["waitingSeconds"] is not None else "-"} for r in rows
    ]
    if not any(r["queue"] for r in rows):
        return table(shown, [c for c in TOP_COLUMNS if c[0] != "queue"])
    return f"{table(shown, TOP_COLUMNS)}\n\n{table(queue_rows(rows), QUEUE_COLUMNS)}"


QUEUE_COLUMNS = [("queue", "QUEUE"), ("gangs", "GANGS"), ("pending", "PENDING"), ("gpusHeld", "GPUS")]


def queue_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per queue (gangs without one under ``-``): gangs, how many are not admitted, GPUs held."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        q = out.setdefault(
            r["queue"] or "-", {"queue": r["queue"] or "-", "gangs": 0, "pending": 0, "gpusHeld": 0}
        )
        q["gangs"] += 1
        q["pending"] += 1 if r["waitingSeconds"] is not None else 0
        q["gpusHeld"] += r["gpusHeld"]
    return sorted(out.values(), key=lambda q: str(q["queue"]))
