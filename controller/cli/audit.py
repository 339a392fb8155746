"""``kubectl phalanx audit``: what opting a namespace in would do to the workloads it has. Pure.

Each top-level workload (Job, StatefulSet, MPIJob) is sent through the webhook's own mutation
(``webhook.mutate``) as if it were created now; its pods are built from the mutated templates and
parsed by the controller's ``records.pod_record``, sized by ``gangs.inferred_min_member`` and
``gangs.creatable`` as the controller would, and the resulting gang is planned by the real core:
once on the empty cluster (does it fit at all?) and once on the cluster as it is (would it wait?).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller import gangs, records
from controller.cli.cluster import ClusterState
from controller.cli.render import table
from controller.core.model import Admit, Gang, GangKey, Pod, Preempt, Reason, Reject, Snapshot, Wait
from controller.core.planner import plan
from controller.core.whatif import without
from shared import constants as c
from webhook.mutate import MutationConfig, Outcome, mutate
from webhook.patch import APPEND
from webhook.shapes import get_in, integer
from webhook.workloads import KINDS, MPI_LAUNCHER, MPI_WORKER, WAIT_FOR_WORKERS_READY, job_size

ERROR, WARNING, INFO = "error", "warning", "info"
_RANK = {ERROR: 0, WARNING: 1, INFO: 2}


@dataclass(frozen=True, slots=True)
class Finding:
    severity: str  # error: would never start; warning: likely trouble; info: what changes
    namespace: str
    workload: str  # Kind/name
    check: str
    message: str

    def data(self) -> dict[str, str]:
        return {
            "severity": self.severity,
            "namespace": self.namespace,
            "workload": self.workload,
            "check": self.check,
            "message": self.message,
        }


# ---- the webhook's patch, applied ---------------------------------------------------------------


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(doc: Any, ops: Iterable[Mapping[str, Any]]) -> Any:
    """Apply the webhook's JSONPatch (it only adds and replaces) to a copy of ``doc``."""
    out = copy.deepcopy(doc)
    for op in ops:
        tokens = [_unescape(t) for t in str(op["path"]).split("/")[1:]]
        parent = out
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if isinstance(parent, list):
            if last == APPEND:
                parent.append(copy.deepcopy(op["value"]))
            elif op["op"] == "add":
                parent.insert(int(last), copy.deepcopy(op["value"]))
            else:
                parent[int(last)] = copy.deepcopy(op["value"])
        else:
            parent[last] = copy.deepcopy(op["value"])
    return out


# ---- pods of a workload, as they would be created -------------------------------------------------


def _template_replicas(kind: str, path: tuple[str, ...], workload: dict[str, Any]) -> int:
    if kind == "Job":
        return job_size(workload)
    if kind == "StatefulSet":
        return max(integer(get_in(workload, "spec", "replicas"), 1), 0)
    if path[: len(MPI_LAUNCHER)] == MPI_LAUNCHER:
        if get_in(workload, "spec", "launcherCreationPolicy") == WAIT_FOR_WORKERS_READY:
            return 0  # created only once the workers run
        return integer(get_in(workload, *MPI_LAUNCHER, "replicas"), 1)
    if path[: len(MPI_WORKER)] == MPI_WORKER:
        return integer(get_in(workload, *MPI_WORKER, "replicas"), 0)
    return 1


def _pods(state: ClusterState, kind: str, workload: dict[str, Any]) -> list[Pod]:
    """The gated member pods the mutated ``workload`` would create (all its replicas)."""
    meta = workload.get("metadata") or {}
    namespace, name, uid = str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))
    owner = {
        "apiVersion": workload.get("apiVersion"),
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
    }
    gvk_kind = next(k for k in KINDS.values() if k.name == kind)
    pods = []
    for path in gvk_kind.paths(workload):
        template = get_in(workload, *path)
        if not isinstance(template, dict):
            continue
        tmeta = template.get("metadata") or {}
        spec = dict(template.get("spec") or {})
        if c.POD_GROUP_LABEL not in (tmeta.get("labels") or {}):
            continue  # not gated by the webhook
        pc = state.store.priority_classes.get(str(spec.get("priorityClassName", "")))
        if pc is not None:  # the API server resolves it at creation
            spec["priority"] = pc.value
            spec.setdefault("preemptionPolicy", pc.preemption_policy)
        for i in range(_template_replicas(kind, path, workload)):
            raw = {
                "metadata": {
                    "namespace": namespace,
                    "name": f"{name}-{path[-2] if len(path) > 2 else 'pod'}-{i}".lower(),
                    "uid": f"audit:{namespace}/{kind}/{name}/{'.'.join(path)}/{i}",
                    "labels": tmeta.get("labels") or {},
                    "annotations": tmeta.get("annotations") or {},
                    "ownerReferences": [owner],
                },
                "spec": spec,
            }
            pods.append(records.pod_record(raw))
    return pods


def _gang(state: ClusterState, key: GangKey, members: list[Pod]) -> Gang:
    existing = state.store.podgroup(key)
    spec = existing.spec if existing is not None else {}
    min_member = gangs._int(spec.get("minMember")) or gangs.inferred_min_member(members) or 1
    return Gang(
        key=key,
        min_member=min_member,
        members=tuple(members),
        max_member=gangs._int(spec.get("maxMember")),
        priority=max((p.priority for p in members), default=0),
        created=state.now,
        waiting_since=state.now,
        creatable=gangs.creatable(members),
        preemption_policy="Never"
        if any(p.preemption_policy == "Never" for p in members)
        else "PreemptLowerPriority",
    )


# ---- checks --------------------------------------------------------------------------------------


def _empty_cluster(state: ClusterState, gang: Gang) -> Snapshot:
    """Only what never leaves (DaemonSet pods) stays: does the gang fit the cluster at all?"""
    permanent = tuple(
        p
        for p in state.snapshot.pods
        if p.owner is not None and p.owner.kind in state.config.permanent_owner_kinds
    )
    return Snapshot(
        nodes=state.snapshot.nodes,
        pods=(*permanent, *gang.members),
        gangs=(gang,),
        now=state.now,
        opted_in_namespaces=frozenset({gang.key.namespace}),
    )


def _as_now(state: ClusterState, gang: Gang, own: set[str]) -> Snapshot:
    """The cluster as it is, the workload's own pods and gang replaced by the hypothetical ones."""
    base = without(state.snapshot, own)
    others = tuple(g for g in base.gangs if g.key != gang.key)
    return replace(
        base,
        pods=(*base.pods, *gang.members),
        gangs=(*others, gang),
        opted_in_namespaces=base.opted_in_namespaces | {gang.key.namespace},
    )


def _own_pods(state: ClusterState, uid: str) -> set[str]:
    """Pods of the workload now (also through the Jobs it owns)."""
    owners = {uid}
    for job in state.workloads.get("Job", ()):
        meta = job.get("metadata") or {}
        if any(ref.get("uid") == uid for ref in meta.get("ownerReferences") or ()):
            owners.add(str(meta.get("uid", "")))
    return {p.uid for p in state.snapshot.pods if p.owner is not None and p.owner.uid in owners}


def _check_workload(
    state: ClusterState, kind: str, raw: dict[str, Any], config: MutationConfig
) -> list[Finding]:
    gvk_kind = next((gvk, k) for gvk, k in KINDS.items() if k.name == kind)
    meta = raw.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    label = f"{kind}/{name}"

    def finding(severity: str, check: str, message: str) -> Finding:
        return Finding(severity, namespace, label, check, message)

    obj = {k: v for k, v in raw.items() if k != "status"}
    request = {
        "operation": "CREATE",
        "kind": {"group": gvk_kind[0][0], "version": gvk_kind[0][1], "kind": kind},
        "namespace": namespace,
        "object": obj,
    }
    mutation = mutate(request, config)
    if mutation.outcome is Outcome.REJECTED:
        return [finding(ERROR, "Refused", f"the webhook would refuse it: {mutation.reason}")]
    if mutation.outcome is Outcome.SKIPPED:
        why = mutation.reason + (f" ({'; '.join(mutation.warnings)})" if mutation.warnings else "")
        return [finding(INFO, "NotGangScheduled", why)]
    out: list[Finding] = []
    for warning in mutation.warnings:
        text = warning.removeprefix("phalanx: ")
        if "podManagementPolicy" in warning:
            out.append(
                finding(
                    WARNING,
                    "OrderedReady",
                    f"{text}. The existing StatefulSet keeps its policy (it cannot change): delete and "
                    "re-create it after opting in",
                )
            )
        elif "activeDeadlineSeconds" not in warning and " join gang " not in warning:
            # (Joining the gang is said by WouldStart/WouldWait; the deadline by Deadline.)
            out.append(finding(INFO, "Webhook", text))
    mutated = apply_patch(obj, mutation.ops)
    members = _pods(state, kind, mutated)
    by_group: dict[str, list[Pod]] = {}
    for pod in members:
        if pod.group:
            by_group.setdefault(pod.group, []).append(pod)
    own = _own_pods(state, str(meta.get("uid", "")))
    deadline_path = gvk_kind[1].deadline_path
    deadline = integer(get_in(raw, *deadline_path), 0) if deadline_path else 0
    for group, pods in sorted(by_group.items()):
        gang = _gang(state, GangKey(namespace, group), pods)
        at_all = plan(_empty_cluster(state, gang), state.config).for_gang(gang.key)
        if isinstance(at_all, Reject):
            out.append(finding(ERROR, "GroupSize", f"gang {group}: {at_all.message}"))
            continue
        if isinstance(at_all, Wait) and at_all.reason is Reason.UNSCHEDULABLE:
            out.append(finding(ERROR, "NeverFits", f"gang {group} would never start: {at_all.message}"))
            continue
        if isinstance(at_all, Wait):
            out.append(finding(ERROR, "NeverStarts", f"gang {group}: {at_all.message}"))
            continue
        now = plan(_as_now(state, gang, own), state.config).for_gang(gang.key)
        size = f"{gang.min_member} {'member' if gang.min_member == 1 else 'members'}"
        if isinstance(now, Admit):
            out.append(finding(INFO, "WouldStart", f"gang {group} ({size}) would start now: {now.message}"))
        elif isinstance(now, Preempt):
            out.append(finding(INFO, "WouldPreempt", f"gang {group} ({size}): {now.message}"))
        elif now is not None:
            out.append(finding(INFO, "WouldWait", f"gang {group} ({size}) would wait now: {now.message}"))
            if deadline > 0:
                path = ".".join(deadline_path or ())
                out.append(
                    finding(
                        WARNING,
                        "Deadline",
                        f"{path}={deadline}s keeps counting while the gang waits, and it would wait now: "
                        f"the {kind} fails if room does not appear within {deadline}s",
                    )
                )
    for scheduler in sorted(_schedulers(kind, mutated)):
        if scheduler not in state.schedulers_seen:
            out.append(
                finding(
                    ERROR,
                    "SchedulerMissing",
                    f"schedulerName {scheduler}: no pod in the cluster was placed by it; if it is not "
                    "installed the pods stay Pending once their gate is lifted",
                )
            )
    return out


def _schedulers(kind: str, workload: dict[str, Any]) -> set[str]:
    gvk_kind = next(k for k in KINDS.values() if k.name == kind)
    names = set()
    for path in gvk_kind.paths(workload):
        name = get_in(workload, *path, "spec", "schedulerName")
        if isinstance(name, str) and name and name != c.DEFAULT_SCHEDULER:
            names.add(name)
    return names


def audit(state: ClusterState, namespace: str | None, config: MutationConfig | None = None) -> list[Finding]:
    """Findings for every top-level workload of ``namespace`` (None: every namespace the webhook serves)."""
    config = config or MutationConfig()
    findings: list[Finding] = []
    for kind in ("Job", "StatefulSet", "MPIJob"):
        for raw in state.workloads.get(kind, ()):
            meta = raw.get("metadata") or {}
            ns = str(meta.get("namespace", ""))
            if (namespace is not None and ns != namespace) or ns in config.excluded_namespaces:
                continue
            if any(ref.get("controller") for ref in meta.get("ownerReferences") or ()):
                continue  # made by another workload (MPIJob launcher, CronJob): audited with it
            findings.extend(_check_workload(state, kind, raw, config))
    findings.sort(key=lambda f: (_RANK[f.severity], f.namespace, f.workload, f.check))
    return findings


def text(findings: list[Finding]) -> str:
    if not findings:
        return "No workloads to audit."
    rows = [f.data() for f in findings]
    columns = [
        ("severity", "SEVERITY"),
        ("namespace", "NAMESPACE"),
        ("workload", "WORKLOAD"),
        ("check", "CHECK"),
        ("message", "MESSAGE"),
    ]
    errors = sum(1 for f in findings if f.severity == ERROR)
    warnings = sum(1 for f in findings if f.severity == WARNING)
    summary = f"{errors} would never start, {warnings} {'warning' if warnings == 1 else 'warnings'}"
    return f"{table(rows, columns)}\n\n{summary}"
