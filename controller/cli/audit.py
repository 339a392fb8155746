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
from enum import StrEnum
from typing import Any

from controller.api import admission_record, records
from controller.cli.cluster import ClusterState
from controller.cli.render import table
from controller.core import (
    Admit,
    DraWorld,
    Gang,
    GangKey,
    Pod,
    Preempt,
    Reason,
    Reject,
    Snapshot,
    Wait,
    plan,
    without,
)
from controller.core import messages as msg
from controller.pipeline import gangs
from controller.pipeline.podgroups import declared_size, waiting_message
from shared import constants
from shared.grouplink import workload_group_name
from shared.jsonread import get_in, integer
from shared.kinds import KINDS
from shared.podgroup import PodGroupSpec
from shared.workloads import GVK, MPI_LAUNCHER, MPI_WORKER, WAIT_FOR_WORKERS_READY, WorkloadKind, job_size
from webhook.mutate import MutationConfig, Outcome, mutate
from webhook.patch import APPEND

ERROR, WARNING, INFO = "error", "warning", "info"


class Check(StrEnum):
    """What an audit finding is about: its ``check`` (the CHECK column, the JSON field)."""

    REFUSED = "Refused"  # (error) the webhook would refuse the workload
    NOT_GANG_SCHEDULED = "NotGangScheduled"  # (info) the webhook would leave it alone, and why
    ORDERED_READY = "OrderedReady"  # (warning) a StatefulSet whose pods start one by one: recreate it
    WEBHOOK = "Webhook"  # (info) another warning of the webhook's
    SIZE_UNKNOWN = "SizeUnknown"  # (error) its gang's size cannot be known: it would wait
    GROUP_SIZE = "GroupSize"  # (error) its gang's size can never be satisfied, or is past what Phalanx admits
    NEVER_FITS = "NeverFits"  # (error) no node could ever hold a member, even on an empty cluster
    NEVER_STARTS = "NeverStarts"  # (error) its gang could not start even on an empty cluster
    WOULD_START = "WouldStart"  # (info) its gang would start now
    WOULD_PREEMPT = "WouldPreempt"  # (info) its gang would start now by preempting lower priority
    WOULD_WAIT = "WouldWait"  # (info) its gang would wait now, and for what
    DEADLINE = "Deadline"  # (warning) a deadline that keeps counting while the gang waits
    SCHEDULER_MISSING = "SchedulerMissing"  # (error) its pods name a scheduler nothing shows running


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


@dataclass(frozen=True, slots=True)
class _Workload:
    """The top-level workload being audited, as it is now (before the webhook's patch)."""

    kind: str
    raw: dict[str, Any]

    @property
    def gvk(self) -> GVK:
        return next(gvk for gvk, spec in KINDS.items() if spec.name == self.kind)

    @property
    def spec(self) -> WorkloadKind:
        """What the webhook knows of the kind: its pod templates and its deadline."""
        return KINDS[self.gvk]

    def _meta(self, key: str) -> str:
        return str((self.raw.get("metadata") or {}).get(key, ""))

    @property
    def namespace(self) -> str:
        return self._meta("namespace")

    @property
    def name(self) -> str:
        return self._meta("name")

    @property
    def uid(self) -> str:
        return self._meta("uid")

    def finding(self, severity: str, check: Check, message: str) -> Finding:
        return Finding(severity, self.namespace, f"{self.kind}/{self.name}", check.value, message)


# ---- the webhook's patch, applied ---------------------------------------------------------------


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(doc: Any, ops: Iterable[Mapping[str, Any]]) -> Any:
    """Apply the webhook's JSONPatch (it only adds and replaces) to a copy of ``doc``."""
    patched = copy.deepcopy(doc)
    for op in ops:
        tokens = [_unescape(token) for token in str(op["path"]).split("/")[1:]]
        parent = patched
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
    return patched


# ---- pods of a workload, as they would be created -------------------------------------------------


def _template_replicas(kind: str, path: tuple[str, ...], workload: dict[str, Any]) -> int:
    """How many pods of one template the workload's operator creates at once (its gang's share)."""
    if kind == "Job":
        return job_size(workload)
    if kind == "StatefulSet":
        return max(integer(get_in(workload, "spec", "replicas"), 1), 0)
    if kind == "MPIJob":
        if path[: len(MPI_LAUNCHER)] == MPI_LAUNCHER:
            if get_in(workload, "spec", "launcherCreationPolicy") == WAIT_FOR_WORKERS_READY:
                return 0  # created only once the workers run
            return integer(get_in(workload, *MPI_LAUNCHER, "replicas"), 1)
        return integer(get_in(workload, *MPI_WORKER, "replicas"), 0)
    if kind == "JobSet":  # spec.replicatedJobs.<i>.template.spec.template
        item = get_in(workload, *path[:3])
        if not isinstance(item, dict):
            return 0
        return max(integer(item.get("replicas"), 1), 0) * job_size(item.get("template") or {})
    if kind == "RayCluster":
        if path[1] == "headGroupSpec":
            return 1
        group = get_in(workload, *path[:3])  # spec.workerGroupSpecs.<i>
        if not isinstance(group, dict) or group.get("suspend") is True:
            return 0
        return max(integer(group.get("minReplicas"), 0), 0) * max(integer(group.get("numOfHosts"), 1), 1)
    if kind == "LeaderWorkerSet":  # one group: the leader and size - 1 workers
        if path[-1] == "leaderTemplate":
            return 1
        return max(integer(get_in(workload, "spec", "leaderWorkerTemplate", "size"), 1) - 1, 0)
    return 1


def _pods(state: ClusterState, workload: _Workload, mutated: dict[str, Any]) -> list[Pod]:
    """The gated member pods the mutated workload would create (all its replicas)."""
    owner = {
        "apiVersion": mutated.get("apiVersion"),
        "kind": workload.kind,
        "name": workload.name,
        "uid": workload.uid,
        "controller": True,
    }
    pods = []
    for template_index, path in enumerate(workload.spec.paths(mutated)):
        template = get_in(mutated, *path)
        if not isinstance(template, dict):
            continue
        template_meta = template.get("metadata") or {}
        annotations = template_meta.get("annotations") or {}
        labels = dict(template_meta.get("labels") or {})
        if workload.spec.grouped_per_pod and constants.INFERRED_MIN_MEMBER_ANNOTATION in annotations:
            # Each replica group is a gang, named when its pods are made: the first one stands for all.
            labels[constants.POD_GROUP_LABEL] = workload_group_name(workload.name, "0")
        if constants.POD_GROUP_LABEL not in labels:
            continue  # not gated by the webhook
        spec = _with_priority(state, dict(template.get("spec") or {}))
        uid_prefix = f"audit:{workload.namespace}/{workload.kind}/{workload.name}/{'.'.join(path)}"
        for replica in range(_template_replicas(workload.kind, path, mutated)):
            raw = {
                "metadata": {
                    "namespace": workload.namespace,
                    "name": f"{workload.name}-{template_index}-{replica}".lower(),
                    "uid": f"{uid_prefix}/{replica}",
                    "labels": labels,
                    "annotations": annotations,
                    "ownerReferences": [owner],
                },
                "spec": spec,
            }
            pods.append(records.pod_record(raw))
    return pods


def _with_priority(state: ClusterState, pod_spec: dict[str, Any]) -> dict[str, Any]:
    """``pod_spec`` with its PriorityClass resolved, as the API server does at creation."""
    priority_class = state.store.priority_classes.get(str(pod_spec.get("priorityClassName", "")))
    if priority_class is not None:
        pod_spec["priority"] = priority_class.value
        pod_spec.setdefault("preemptionPolicy", priority_class.preemption_policy)
    return pod_spec


def _gang(state: ClusterState, key: GangKey, members: list[Pod]) -> Gang | str:
    """The gang as the controller would plan it, or what it would wait for to learn its size."""
    existing = state.store.podgroup(key)
    spec = existing.spec if existing is not None else PodGroupSpec()
    min_member = spec.min_member
    if min_member is None:
        sizing = declared_size(key, members, state.store)  # as the controller sizes a new PodGroup
        if sizing.min_member is None:
            return waiting_message(sizing)
        min_member = sizing.min_member
    return Gang(
        key=key,
        min_member=min_member,
        members=tuple(members),
        max_member=spec.max_member,
        priority=max((pod.priority for pod in members), default=0),
        created=state.now,
        waiting_since=state.now,
        creatable=gangs.creatable(members),
        preemption_policy="Never"
        if any(pod.preemption_policy == "Never" for pod in members)
        else "PreemptLowerPriority",
    )


# ---- checks --------------------------------------------------------------------------------------


def _empty_cluster(state: ClusterState, gang: Gang) -> Snapshot:
    """Only what never leaves (DaemonSet pods) stays: does the gang fit the cluster at all?"""
    permanent = tuple(
        pod
        for pod in state.snapshot.pods
        if pod.owner is not None and pod.owner.kind in state.config.permanent_owner_kinds
    )
    return Snapshot(
        nodes=state.snapshot.nodes,
        pods=(*permanent, *gang.members),
        gangs=(gang,),
        now=state.now,
        opted_in_namespaces=frozenset({gang.key.namespace}),
        devices=_devices_freed(state.snapshot.devices, {pod.uid for pod in permanent}),
    )


def _devices_freed(world: DraWorld | None, kept: set[str]) -> DraWorld | None:
    """The DRA devices with every claim's allocation dropped but those of pods that stay: the claims
    themselves stay (a gang may name one)."""
    if world is None:
        return None
    claims = {
        key: claim
        if kept.intersection(claim.reserved_for)
        else replace(claim, allocated=(), allocated_node=None, reserved_for=())
        for key, claim in world.claims.items()
    }
    return replace(world, claims=claims)


def _as_now(state: ClusterState, gang: Gang, own: set[str]) -> Snapshot:
    """The cluster as it is, the workload's own pods and gang replaced by the hypothetical ones."""
    base = without(state.snapshot, own)
    others = tuple(other for other in base.gangs if other.key != gang.key)
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
    return {pod.uid for pod in state.snapshot.pods if pod.owner is not None and pod.owner.uid in owners}


def _check_workload(
    state: ClusterState, kind: str, raw: dict[str, Any], config: MutationConfig
) -> list[Finding]:
    """What opting in would do to one top-level workload: the webhook's verdict, then, for each gang
    its pods would form, whether it could ever start and whether it would start now."""
    workload = _Workload(kind, raw)
    without_status = {key: value for key, value in raw.items() if key != "status"}
    mutation = mutate(_create_request(workload, without_status), config)
    if mutation.outcome is Outcome.REJECTED:
        return [workload.finding(ERROR, Check.REFUSED, f"the webhook would refuse it: {mutation.reason}")]
    if mutation.outcome is Outcome.SKIPPED:
        why = mutation.reason + (f" ({'; '.join(mutation.warnings)})" if mutation.warnings else "")
        return [workload.finding(INFO, Check.NOT_GANG_SCHEDULED, why)]
    mutated = apply_patch(without_status, mutation.ops)
    return [
        *_webhook_warnings(workload, mutation.warnings),
        *_gang_findings(state, workload, mutated),
        *_scheduler_findings(state, workload, mutated),
    ]


def _create_request(workload: _Workload, manifest: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionRequest the API server would send the webhook if ``manifest`` were created now."""
    group, version, kind = workload.gvk
    return {
        "operation": "CREATE",
        "kind": {"group": group, "version": version, "kind": kind},
        "namespace": workload.namespace,
        "object": manifest,
    }


def _webhook_warnings(workload: _Workload, warnings: Iterable[str]) -> list[Finding]:
    """The webhook's warnings that say something the other checks do not."""
    findings = []
    for warning in warnings:
        text = warning.removeprefix("phalanx: ")
        if "podManagementPolicy" in warning:
            message = (
                f"{text}. The existing StatefulSet keeps its policy (it cannot change): delete and "
                "re-create it after opting in"
            )
            findings.append(workload.finding(WARNING, Check.ORDERED_READY, message))
        elif "activeDeadlineSeconds" not in warning and " join gang " not in warning:
            # (Joining the gang is said by WouldStart/WouldWait; the deadline by Deadline.)
            findings.append(workload.finding(INFO, Check.WEBHOOK, text))
    return findings


def _gang_findings(state: ClusterState, workload: _Workload, mutated: dict[str, Any]) -> list[Finding]:
    """For each gang the mutated workload's pods would form: could it ever start, would it now?"""
    by_group: dict[str, list[Pod]] = {}
    for pod in _pods(state, workload, mutated):
        if pod.group:
            by_group.setdefault(pod.group, []).append(pod)
    own = _own_pods(state, workload.uid)
    findings = []
    for group, members in sorted(by_group.items()):
        gang = _gang(state, GangKey(workload.namespace, group), members)
        if isinstance(gang, str):
            findings.append(workload.finding(ERROR, Check.SIZE_UNKNOWN, f"gang {group} would wait: {gang}"))
            continue
        never = _never_starts(state, workload, gang)
        findings.extend([never] if never is not None else _starts_now(state, workload, gang, own))
    return findings


def _never_starts(state: ClusterState, workload: _Workload, gang: Gang) -> Finding | None:
    """Why the gang could not start even on the empty cluster, or None when it could."""
    group = gang.key.name
    on_empty = plan(_empty_cluster(state, gang), state.config).for_gang(gang.key)
    if isinstance(on_empty, Reject):
        return workload.finding(ERROR, Check.GROUP_SIZE, f"gang {group}: {on_empty.message}")
    if isinstance(on_empty, Wait) and on_empty.reason is Reason.UNSCHEDULABLE:
        return workload.finding(
            ERROR, Check.NEVER_FITS, f"gang {group} would never start: {on_empty.message}"
        )
    if isinstance(on_empty, Wait):
        return workload.finding(ERROR, Check.NEVER_STARTS, f"gang {group}: {on_empty.message}")
    if isinstance(on_empty, Admit):
        size = admission_record.size_for(on_empty.placement, on_empty.booked)
        if size > admission_record.RECORD_LIMIT:
            why = msg.admission_record_too_large(len(on_empty.placement), size, admission_record.RECORD_LIMIT)
            return workload.finding(ERROR, Check.GROUP_SIZE, f"gang {group}: {why}")
    return None


def _starts_now(state: ClusterState, workload: _Workload, gang: Gang, own: set[str]) -> list[Finding]:
    """What the gang would do on the cluster as it is: start, preempt, or wait (and then run out
    its deadline)."""
    group = gang.key.name
    decision = plan(_as_now(state, gang, own), state.config).for_gang(gang.key)
    size = f"{gang.min_member} {'member' if gang.min_member == 1 else 'members'}"
    if isinstance(decision, Admit):
        return [
            workload.finding(
                INFO, Check.WOULD_START, f"gang {group} ({size}) would start now: {decision.message}"
            )
        ]
    if isinstance(decision, Preempt):
        return [workload.finding(INFO, Check.WOULD_PREEMPT, f"gang {group} ({size}): {decision.message}")]
    if decision is None:
        return []
    findings = [
        workload.finding(INFO, Check.WOULD_WAIT, f"gang {group} ({size}) would wait now: {decision.message}")
    ]
    deadline_path = workload.spec.deadline_path
    deadline = integer(get_in(workload.raw, *deadline_path), 0) if deadline_path else 0
    if deadline > 0:
        message = (
            f"{'.'.join(deadline_path or ())}={deadline}s keeps counting while the gang waits, and it "
            f"would wait now: the {workload.kind} fails if room does not appear within {deadline}s"
        )
        findings.append(workload.finding(WARNING, Check.DEADLINE, message))
    return findings


def _scheduler_findings(state: ClusterState, workload: _Workload, mutated: dict[str, Any]) -> list[Finding]:
    """Schedulers the pods name that nothing in the cluster shows to be running."""
    message = (
        "schedulerName {}: no pod in the cluster was placed by it; if it is not installed the pods "
        "stay Pending once their gate is lifted"
    )
    return [
        workload.finding(ERROR, Check.SCHEDULER_MISSING, message.format(scheduler))
        for scheduler in sorted(_schedulers(workload.spec, mutated))
        if scheduler not in state.schedulers_seen
    ]


def _schedulers(spec: WorkloadKind, workload: dict[str, Any]) -> set[str]:
    """The schedulers other than the default one that the workload's pod templates name."""
    names = set()
    for path in spec.paths(workload):
        name = get_in(workload, *path, "spec", "schedulerName")
        if isinstance(name, str) and name and name != constants.DEFAULT_SCHEDULER:
            names.add(name)
    return names


def audit(state: ClusterState, namespace: str | None, config: MutationConfig | None = None) -> list[Finding]:
    """Findings for every top-level workload of ``namespace`` (None: every namespace the webhook serves)."""
    config = config or MutationConfig()
    findings: list[Finding] = []
    for kind in sorted(spec.name for spec in KINDS.values()):
        for raw in state.workloads.get(kind, ()):
            meta = raw.get("metadata") or {}
            its_namespace = str(meta.get("namespace", ""))
            asked_for = namespace is None or its_namespace == namespace
            if not asked_for or its_namespace in config.excluded_namespaces:
                continue
            if any(ref.get("controller") for ref in meta.get("ownerReferences") or ()):
                continue  # made by another workload (MPIJob launcher, CronJob): audited with it
            findings.extend(_check_workload(state, kind, raw, config))
    findings.sort(
        key=lambda finding: (_RANK[finding.severity], finding.namespace, finding.workload, finding.check)
    )
    return findings


def text(findings: list[Finding]) -> str:
    if not findings:
        return "No workloads to audit."
    rows = [finding.data() for finding in findings]
    columns = [
        ("severity", "SEVERITY"),
        ("namespace", "NAMESPACE"),
        ("workload", "WORKLOAD"),
        ("check", "CHECK"),
        ("message", "MESSAGE"),
    ]
    errors = sum(1 for finding in findings if finding.severity == ERROR)
    warnings = sum(1 for finding in findings if finding.severity == WARNING)
    summary = f"{errors} would never start, {warnings} {'warning' if warnings == 1 else 'warnings'}"
    return f"{table(rows, columns)}\n\n{summary}"
