"""The admission mutation: an AdmissionRequest dict in, JSONPatch ops and warnings out. No I/O.

Workloads (the kinds of ``shared.workloads.KINDS``: Job, StatefulSet, MPIJob, JobSet,
LeaderWorkerSet, RayCluster, TrainJob) get the gang gate, the canonical group label, the inferred
gang size and the user's Phalanx annotations on every pod template, so that each pod is born gated.
Pods are handled too, for those created without such a template (a bare Pod with a foreign group
link).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from shared import constants as c
from shared import workloads
from shared.grouplink import GroupLink, declared_min_available, opted_in, resolve, skipped
from shared.jsonread import get_in, obj, positive_number, strings, text
from shared.kinds import JOB, KINDS, POD, STATEFULSET
from shared.topology import TopologyAsk
from shared.workloads import GVK, WorkloadKind, per_group_link
from webhook import traps
from webhook.patch import JsonPatchOp, PatchBuilder, Path, ShapeError
from webhook.traps import operator_traps
from webhook.validation import (
    check_annotations,
    check_group_name,
    check_templates_agree,
    check_topology,
    topology_ask,
)

DEFAULT_EXCLUDED_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease", "phalanx-system"})

# Workload annotations copied onto pod templates: the controller reads pods, not workloads.
COPIED_ANNOTATIONS = (
    c.MIN_MEMBER_ANNOTATION,
    c.SCHEDULE_TIMEOUT_ANNOTATION,
    c.PLACEMENT_ANNOTATION,
    c.PREEMPTIBLE,
    *c.TOPOLOGY_ANNOTATIONS,
    c.QUEUE_LABEL,  # from the workload's queue label (workload_queue): its pods carry it
)


def workload_queue(labels: Mapping[str, str]) -> dict[str, str]:
    """A workload's queue link label (Kueue puts it on the Job, not on its template), as the
    annotation its pods carry."""
    queue = next((labels[k] for k in c.QUEUE_LINK_LABELS if labels.get(k)), None)
    return {c.QUEUE_LABEL: queue} if queue else {}


class Outcome(StrEnum):
    PATCHED = "patched"  # at least one patch operation
    UNCHANGED = "unchanged"  # a gang member that already carries everything (re-admission)
    SKIPPED = "skipped"  # not Phalanx's business: other operation, kind, namespace, opt-out
    REJECTED = "rejected"  # allowed: false


@dataclass(frozen=True, slots=True)
class MutationConfig:
    foreign_schedulers: frozenset[str] = frozenset(c.DEFAULT_FOREIGN_GANG_SCHEDULERS)
    target_scheduler: str = c.DEFAULT_SCHEDULER
    excluded_namespaces: frozenset[str] = DEFAULT_EXCLUDED_NAMESPACES


# Not frozen: one is made on every request, and a frozen dataclass's __init__ costs twice as much.
@dataclass(slots=True)
class Mutation:
    outcome: Outcome
    ops: list[JsonPatchOp] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Why nothing was done (for logs), or, when rejected, the message shown to the user.
    reason: str = ""
    group: str | None = None

    @property
    def allowed(self) -> bool:
        return self.outcome is not Outcome.REJECTED


def request_gvk(request: Mapping[str, Any]) -> GVK:
    return workloads.gvk_of(obj(request.get("kind")))


def mutate(request: Mapping[str, Any], config: MutationConfig) -> Mutation:
    """Decide the patch for one AdmissionRequest (the ``request`` member of an AdmissionReview)."""
    return mutate_request(request, text(request.get("operation")), request_gvk(request), config)


def mutate_request(request: Mapping[str, Any], operation: str, gvk: GVK, config: MutationConfig) -> Mutation:
    """``mutate``, for a caller that has read the request's operation and kind already."""
    if operation == "UPDATE" and gvk == STATEFULSET and not text(request.get("subResource")):
        return _keep_parallel(request, config)
    if operation != "CREATE":
        # Gates can only be added at CREATE, and Phalanx changes nothing else.
        return Mutation(Outcome.SKIPPED, reason=f"operation {operation or '?'}")
    if text(request.get("subResource")):
        return Mutation(Outcome.SKIPPED, reason="subresource")
    kind = KINDS.get(gvk)
    if gvk != POD and kind is None:
        return Mutation(Outcome.SKIPPED, reason="kind not handled")
    body = request.get("object")
    if not isinstance(body, dict):
        return Mutation(Outcome.SKIPPED, reason="no object")
    namespace = text(request.get("namespace")) or text(get_in(body, "metadata", "namespace"))
    if namespace in config.excluded_namespaces:
        return Mutation(Outcome.SKIPPED, reason="excluded namespace")
    if kind is None:
        return _mutate_pod(body, config)
    return _mutate_workload(gvk, kind, body, config)


def _keep_parallel(request: Mapping[str, Any], config: MutationConfig) -> Mutation:
    """Re-applying a manifest that says OrderedReady to a StatefulSet Phalanx made Parallel would be
    refused (the field cannot change after creation): keep the value it has."""
    body, old = request.get("object"), request.get("oldObject")
    if not isinstance(body, dict) or not isinstance(old, dict):
        return Mutation(Outcome.SKIPPED, reason="no object")
    namespace = text(request.get("namespace")) or text(get_in(body, "metadata", "namespace"))
    if namespace in config.excluded_namespaces:
        return Mutation(Outcome.SKIPPED, reason="excluded namespace")
    builder = PatchBuilder(body)
    warnings = traps.keep_parallel(builder, body, old)
    return _finish(builder, warnings, None)


def _finish(builder: PatchBuilder, warnings: list[str], group: str | None) -> Mutation:
    outcome = Outcome.PATCHED if builder.ops else Outcome.UNCHANGED
    return Mutation(outcome, builder.ops, warnings, group=group)


def _has_gate(gates: Any) -> bool:
    if isinstance(gates, list):
        for gate in gates:  # a loop, not any() over a generator: this runs for every pod
            if isinstance(gate, dict) and gate.get("name") == c.GATE:
                return True
    return False


class _Template(NamedTuple):
    """One pod template of a workload, read once."""

    path: Path
    where: str  # the path, dotted, for messages
    body: Any  # a dict when well-formed
    labels: dict[str, str]
    annotations: dict[str, str]
    link: GroupLink | None


def _templates(kind: WorkloadKind, workload: dict[str, Any]) -> list[_Template]:
    found = []
    for path in kind.paths(workload):
        body = get_in(workload, *path)
        if body is None:
            continue
        if isinstance(body, dict):
            meta, spec = obj(body.get("metadata")), obj(body.get("spec"))
        else:
            meta = spec = {}
        labels, annotations = strings(meta.get("labels")), strings(meta.get("annotations"))
        link = resolve(labels, annotations, spec)
        found.append(_Template(path, ".".join(path), body, labels, annotations, link))
    return found


def _mutate_workload(
    gvk: GVK, kind: WorkloadKind, workload: dict[str, Any], config: MutationConfig
) -> Mutation:
    meta = obj(workload.get("metadata"))
    labels, annotations = strings(meta.get("labels")), strings(meta.get("annotations"))
    if skipped(labels, annotations):
        return _skip_workload(kind, workload)
    if denial := check_annotations(annotations, kind.name):
        return Mutation(Outcome.REJECTED, reason=denial)
    if gvk == STATEFULSET and workloads.LWS_NAME_LABEL in labels:
        # A LeaderWorkerSet's own StatefulSet: its templates were gated with the LeaderWorkerSet,
        # each pod joins its group's gang when created, and anything added here would be taken
        # away again by the operator's next server-side apply.
        return Mutation(Outcome.SKIPPED, reason="made by a LeaderWorkerSet")
    try:
        return _WorkloadMutation(gvk, kind, workload, config, meta, labels, annotations).run()
    except _Rejected as rejected:
        return Mutation(Outcome.REJECTED, reason=str(rejected))


class _Rejected(Exception):
    """A template whose annotations or group name the webhook refuses (the reason is the message)."""


class _WorkloadMutation:
    """Gate every pod template of one workload: one gang per workload unless a template names its
    own group (the workload's own link, else the first template's, else the workload's name)."""

    def __init__(
        self,
        gvk: GVK,
        kind: WorkloadKind,
        workload: dict[str, Any],
        config: MutationConfig,
        meta: dict[str, Any],
        labels: dict[str, str],
        annotations: dict[str, str],
    ) -> None:
        self.gvk, self.kind, self.workload, self.config = gvk, kind, workload, config
        self.labels, self.annotations = labels, annotations
        self.name = text(meta.get("name"))
        self.owned = owned_by_workload(meta)
        # The workload's settings its pod templates carry (a template's own value wins), in order.
        settings = {**workload_queue(labels), **annotations}
        self.copied = {key: settings[key] for key in COPIED_ANNOTATIONS if key in settings}
        self.declared = declared_min_available(labels)
        # A workload opted in by its own label (in a namespace that is not): its pods carry the label
        # too, or the webhook configuration, which selects them by it, would never send them here.
        self.pod_labels = {c.OPT_IN_LABEL: c.OPT_IN_VALUE} if opted_in(labels) else {}
        self.templates = _templates(kind, workload)
        self.default = resolve(labels, annotations) or next((t.link for t in self.templates if t.link), None)
        if self.default is None and self.name:
            self.default = GroupLink(self.name, "metadata.name")
        self.builder = PatchBuilder(workload)
        self.warnings: list[str] = []
        self.summaries: list[str] = []
        self.unnamed: list[str] = []  # templates whose gang cannot be named
        self.groups: list[str] = []
        # Per gang, what each of its templates asks of the topology: they must agree.
        self.topology_asks: dict[str, list[tuple[str, TopologyAsk]]] = {}
        self._inferred: int | None = None  # the spec's gang size, computed once when needed

    def run(self) -> Mutation:
        for template in self.templates:
            if not isinstance(template.body, dict):
                self.warnings.append(
                    f"phalanx: {template.where} is not an object; its pods are not gang-scheduled"
                )
            elif not skipped(template.labels, template.annotations):
                self._template(template)
        if self.unnamed:
            self.warnings.append(
                f"phalanx: {self.kind.name} has no metadata.name (generateName) and no group link, so "
                f"its gang cannot be named; {', '.join(self.unnamed)} not gang-scheduled (set label "
                f"{c.POD_GROUP_LABEL} there)"
            )
        if not self.groups:
            # Nothing to gate here (a TrainJob: the Trainer's JobSet is gated), but a suspension still
            # keeps the gang from ever forming.
            self.warnings += traps.kueue_managed(self.kind.name, self.workload)
            return Mutation(Outcome.SKIPPED, warnings=self.warnings, reason="no pod template to gate")
        self.warnings += self._traps()
        return _finish(self.builder, self.summaries + self.warnings, self.groups[0])

    def _template(self, template: _Template) -> None:
        link = template.link or (None if self.kind.grouped_per_pod else self.default)
        if link is None and self.kind.grouped_per_pod:
            self._per_group(template)
        elif link is None:
            # Only generateName: the API server picks the name after admission, so the gang cannot
            # be named from it here. Rare for workloads (manifests use fixed names); a group link
            # on the template avoids it.
            self.unnamed.append(template.where)
        else:
            self._linked(template, link)

    def _per_group(self, template: _Template) -> None:
        if not _gate_per_group(
            self.builder, template, self.kind, self.workload, self.annotations, self.pod_labels, self.warnings
        ):
            return
        self.groups.append(f"{self.name}-<group>")
        self.summaries.append(
            f"phalanx: {template.where} pods join the gang of their {self.kind.name} group "
            f"({_pods(self.kind.gang_size(self.workload))} each, named <name>-<group index>) and wait at "
            f"gate {c.GATE} until the group fits"
        )

    def _linked(self, template: _Template, link: GroupLink) -> None:
        denial = check_annotations(template.annotations, template.where)
        if denial := denial or check_group_name(link.name, link.source):
            raise _Rejected(denial)
        size = self._size(template)
        asked = {**self.copied, **template.annotations}
        if denial := check_topology(asked, size, template.where):
            raise _Rejected(denial)
        asks = self.topology_asks.setdefault(link.name, [])
        asks.append((template.where, topology_ask(asked)))
        if denial := check_templates_agree(asks):
            raise _Rejected(denial)
        mark = len(self.builder.ops)
        try:
            scope = _scope(self.builder, template)
            changed = _gate_template(
                scope,
                template,
                group=link.name,
                size=size,
                copied=self.copied,
                labels=self.pod_labels,
            )
            rewritten = _rewrite_scheduler(scope, template.body.get("spec"), self.config, template.where)
        except ShapeError as err:
            del self.builder.ops[mark:]  # leave this template as it was
            self.warnings.append(f"phalanx: {err}; pods of {template.where} are not gang-scheduled")
            return
        self.groups.append(link.name)
        self.warnings += rewritten
        if changed:
            # The size the controller will use: a min-member annotation wins over the inferred one.
            override = template.annotations.get(c.MIN_MEMBER_ANNOTATION)
            count = int(override or self.annotations.get(c.MIN_MEMBER_ANNOTATION) or size)
            self.summaries.append(
                f"phalanx: {template.where} pods join gang {link.name!r} (from {link.source}, "
                f"{_pods(count)}) and wait at gate {c.GATE} until all fit"
            )

    def _size(self, template: _Template) -> int:
        # The lightweight Coscheduling label carries the gang size itself.
        size = declared_min_available(template.labels) or self.declared
        if size is None and self.owned:
            # Made by another workload's controller from a template the webhook already sized
            # for the whole gang (mpi-operator's launcher Job): that size stands.
            size = positive_number(template.annotations.get(c.INFERRED_MIN_MEMBER_ANNOTATION))
        if size is None:
            if self._inferred is None:
                self._inferred = self.kind.gang_size(self.workload)
            size = self._inferred
        return size

    def _traps(self) -> list[str]:
        """The workload's own settings that would deadlock its gated gang: fixed, or warned about."""
        found = []
        if self.gvk == STATEFULSET:
            found += traps.ordered_ready(self.builder, self.workload)
        if self.kind.deadline_path:
            found += traps.active_deadline(self.workload, self.kind.deadline_path, self.kind.name)
        if self.gvk == JOB:
            found += traps.disruptions_count_as_failures(self.builder, self.workload)
        return found + operator_traps(self.gvk, self.builder, self.workload)


def _skip_workload(kind: WorkloadKind, workload: dict[str, Any]) -> Mutation:
    """Leave a skipped workload alone -- and its pods: pods are admitted one by one, without the
    workload, so a template that links its pods to a group (which would gate them) gets the skip
    label too. Nothing else changes; templates without a link are not touched."""
    builder = PatchBuilder(workload)
    marked = []
    for template in _templates(kind, workload):
        linked = template.link is not None and isinstance(template.body, dict)
        if linked and not skipped(template.labels, template.annotations):
            try:
                _scope(builder, template).merge(("metadata", "labels"), {c.SKIP: "true"})
            except ShapeError:
                continue
            marked.append(template.where)
    reason = f"{kind.name} opted out with {c.SKIP}"
    if not marked:
        return Mutation(Outcome.SKIPPED, reason=reason)
    warning = (
        f"phalanx: {kind.name} opted out with {c.SKIP}; label {c.SKIP}=true added to "
        f"{', '.join(marked)} so that its pods are left alone too"
    )
    return Mutation(Outcome.PATCHED, builder.ops, [warning], reason=reason)


def _scope(builder: PatchBuilder, template: _Template) -> PatchBuilder:
    """A builder for one template; its path may step through a list (``replicatedJobs/0``),
    which ``PatchBuilder.scope`` does not walk. Nothing else in the patch writes below it."""
    if not isinstance(template.body, dict):
        raise ShapeError(template.path)
    return PatchBuilder(template.body, prefix=template.path, ops=builder.ops)


def _gate_per_group(
    builder: PatchBuilder,
    template: _Template,
    kind: WorkloadKind,
    workload: dict[str, Any],
    annotations: Mapping[str, str],
    labels: Mapping[str, str],
    warnings: list[str],
) -> bool:
    """Gate and size a template whose pods are grouped when they are created (LeaderWorkerSet):
    no group label here, ``per_group_link`` names each pod's gang at its admission."""
    mark = len(builder.ops)
    try:
        scope = _scope(builder, template)
        if not _has_gate(get_in(template.body, "spec", "schedulingGates")):
            scope.append(("spec", "schedulingGates"), {"name": c.GATE})
        if any(template.labels.get(key) != value for key, value in labels.items()):
            scope.merge(("metadata", "labels"), dict(labels))
        wanted = {c.INFERRED_MIN_MEMBER_ANNOTATION: str(kind.gang_size(workload))}
        for key in COPIED_ANNOTATIONS:
            if key in annotations and key not in template.annotations:
                wanted[key] = annotations[key]
        scope.merge(("metadata", "annotations"), wanted)
    except ShapeError as err:
        del builder.ops[mark:]
        warnings.append(f"phalanx: {err}; pods of {template.where} are not gang-scheduled")
        return False
    return True


def owned_by_workload(meta: Mapping[str, Any]) -> bool:
    refs = meta.get("ownerReferences")
    return isinstance(refs, list) and any(isinstance(r, dict) and r.get("controller") is True for r in refs)


def _pods(count: int) -> str:
    return f"{count} pod" if count == 1 else f"{count} pods"


def _rewrite_scheduler(builder: PatchBuilder, spec: Any, config: MutationConfig, where: str) -> list[str]:
    return traps.foreign_scheduler(
        builder, obj(spec), config.foreign_schedulers, config.target_scheduler, where
    )


def _gate_template(
    builder: PatchBuilder,
    template: _Template,
    *,
    group: str,
    size: int,
    copied: Mapping[str, str],
    labels: Mapping[str, str],
) -> bool:
    """Gate, label and annotate one pod template (``builder`` is scoped to it) with the workload's
    ``copied`` settings and pod ``labels``; True if anything had to change."""
    before = len(builder.ops)
    if not _has_gate(get_in(template.body, "spec", "schedulingGates")):
        builder.append(("spec", "schedulingGates"), {"name": c.GATE})
    # A template gated before (one a workload's controller made from a gated template) already
    # carries the label and annotations: no merge to walk. The maps read here hold only the
    # template's string values, so a value found equal is equal in the template itself.
    if template.labels.get(c.POD_GROUP_LABEL) != group or any(
        template.labels.get(key) != value for key, value in labels.items()
    ):
        builder.merge(("metadata", "labels"), {c.POD_GROUP_LABEL: group, **labels})
    wanted = {c.INFERRED_MIN_MEMBER_ANNOTATION: str(size)}
    for key, value in copied.items():
        # A value the user wrote on the template itself is more specific than the workload's.
        if key not in template.annotations:
            wanted[key] = value
    annotations = template.annotations
    if any(annotations.get(key) != value for key, value in wanted.items()):
        builder.merge(("metadata", "annotations"), wanted)
    return len(builder.ops) > before


def _ungrouped_pod(pod: dict[str, Any], spec: dict[str, Any], config: MutationConfig) -> Mutation:
    """Not in a gang, but naming a gang scheduler that is not installed (a KAI quickstart pod, a
    Deployment written for Volcano): it would stay Pending forever, so it goes to the default one."""
    if text(spec.get("schedulerName")) not in config.foreign_schedulers:
        return Mutation(Outcome.SKIPPED, reason="pod has no group link")  # nearly always
    builder = PatchBuilder(pod)
    try:
        warnings = _rewrite_scheduler(builder, spec, config, "")
    except ShapeError as err:
        return Mutation(Outcome.SKIPPED, warnings=[f"phalanx: {err}"], reason=str(err))
    if not warnings:
        return Mutation(Outcome.SKIPPED, reason="pod has no group link")
    warnings.append("phalanx: pod has no group link, so it is scheduled on its own (not as a gang)")
    return _finish(builder, warnings, None)


def _mutate_pod(pod: dict[str, Any], config: MutationConfig) -> Mutation:
    meta = obj(pod.get("metadata"))
    labels, annotations = strings(meta.get("labels")), strings(meta.get("annotations"))
    if skipped(labels, annotations):
        return Mutation(Outcome.SKIPPED, reason=f"pod opted out with {c.SKIP}")
    spec = obj(pod.get("spec"))
    link = resolve(labels, annotations, spec) or per_group_link(labels, annotations)
    if link is None:
        return _ungrouped_pod(pod, spec, config)
    if text(spec.get("nodeName")):
        # A pod bound at creation bypasses the scheduler, and the API server refuses gates on it.
        warning = (
            f"phalanx: pod has spec.nodeName set, so it cannot wait at gate {c.GATE}; "
            f"not gang-scheduled with gang {link.name!r}"
        )
        return Mutation(Outcome.SKIPPED, warnings=[warning], reason="nodeName set", group=link.name)
    if denial := check_annotations(annotations, "pod") or check_group_name(link.name, link.source):
        return Mutation(Outcome.REJECTED, reason=denial)

    gated = _has_gate(spec.get("schedulingGates"))
    labelled = labels.get(c.POD_GROUP_LABEL) == link.name
    if gated and labelled and text(spec.get("schedulerName")) not in config.foreign_schedulers:
        # A pod from a template the webhook gated: nearly every pod it sees, and nothing to do.
        return Mutation(Outcome.UNCHANGED, group=link.name)
    builder = PatchBuilder(pod)
    warnings: list[str] = []
    try:
        if not gated:
            builder.append(("spec", "schedulingGates"), {"name": c.GATE})
            warnings.append(f"phalanx: pod joins gang {link.name!r} (from {link.source}) at gate {c.GATE}")
        if not labelled:  # a pod from a gated template has it
            builder.set(("metadata", "labels", c.POD_GROUP_LABEL), link.name)
            if not warnings:
                warnings.append(f"phalanx: pod labelled {c.POD_GROUP_LABEL}={link.name} (from {link.source})")
        warnings += _rewrite_scheduler(builder, spec, config, "")
    except ShapeError as err:
        warning = f"phalanx: {err}; pod is not gang-scheduled"
        return Mutation(Outcome.SKIPPED, warnings=[warning], reason=str(err))
    return _finish(builder, warnings, link.name)
