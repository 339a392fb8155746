"""``kubectl phalanx preflight``: what would stop or harm installing this release here. Read-only.

It reads the server's version and the CRDs of the API groups a Phalanx install serves, and decides
(``decide``, pure) what to report:

- Kubernetes below 1.30 is an error: the ValidatingAdmissionPolicies that guard the scheduling gate
  need ``admissionregistration.k8s.io/v1`` (GA in 1.30); below it the gate is unguarded.
- Phalanx's own CRDs (``queues.scheduling.phalanx.io``) held by another project is an error.
- A compatibility group (scheduler-plugins' ``scheduling.sigs.k8s.io`` and ``scheduling.x-k8s.io``,
  KAI's ``scheduling.run.ai``) already served by another project's CRD is a conflict: that piece of
  the release must not be applied (the Helm chart skips it), and Phalanx works with the objects the
  other CRD serves. Where that CRD cannot hold what Phalanx writes (the version it reads, the phases
  it sets), that is an error.

A CRD is Phalanx's when it carries the label ``app.kubernetes.io/name: phalanx`` (every object of
the release does). The answer ends with the command that installs the release on this cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from controller.api.kube import ApiError, KubeClient
from controller.api.resources import ResourceType
from controller.cli.render import dump
from shared.podgroup import Phase

CRDS = ResourceType(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)
# admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy is GA (served by default) from 1.30.
MIN_KUBERNETES = (1, 30)
OWNER_LABEL = ("app.kubernetes.io/name", "phalanx")
OWN_CRDS = ("queues.scheduling.phalanx.io",)
# What the controller writes into a PodGroup's status (controller/pipeline/status.py).
WRITTEN_PHASES = tuple(phase.value for phase in Phase if phase is not Phase.UNKNOWN)
WRITTEN_STATUS = ("reason", "message", "conditions", "admittedTime")

ERROR, CONFLICT, OK = "error", "conflict", "ok"
HELP = "what would stop or harm installing Phalanx here: CRD conflicts, the Kubernetes version floor"


@dataclass(frozen=True)
class Piece:
    """A separable piece of the release: the CRDs that serve one compatibility API group."""

    group: str
    crds: tuple[str, ...]
    version: str  # the version Phalanx reads and writes
    helm_value: str  # the chart's toggle
    default: bool  # part of the default install (where nobody else serves the group)
    who: str  # the project whose group it is
    # (CRD, version) where one of the piece's CRDs is read at another version than ``version``.
    other_versions: tuple[tuple[str, str], ...] = ()

    def version_of(self, crd: str) -> str:
        return dict(self.other_versions).get(crd, self.version)

    def file(self, release: str) -> str:
        return f"phalanx-{release}-compat-{self.group}.yaml"


PIECES = (
    Piece(
        "scheduling.sigs.k8s.io",
        ("podgroups.scheduling.sigs.k8s.io",),
        "v1alpha1",
        "compat.schedulingSigsK8s",
        default=True,
        who="scheduler-plugins Coscheduling, Alibaba ACS",
    ),
    Piece(
        "scheduling.x-k8s.io",
        ("podgroups.scheduling.x-k8s.io",),
        "v1alpha1",
        "compat.schedulingXK8s",
        default=False,
        who="scheduler-plugins",
    ),
    Piece(
        "scheduling.run.ai",
        ("podgroups.scheduling.run.ai", "queues.scheduling.run.ai"),
        "v2alpha2",  # the PodGroup version KAI stores and Phalanx reads (it serves v2 beside it)
        "compat.schedulingRunAi",
        default=False,
        who="NVIDIA KAI Scheduler",
        other_versions=(("queues.scheduling.run.ai", "v2"),),
    ),
    Piece(
        "scheduling.volcano.sh",
        ("podgroups.scheduling.volcano.sh",),
        "v1beta1",
        "compat.schedulingVolcanoSh",
        default=False,
        who="Volcano",
    ),
)


@dataclass(frozen=True)
class Crd:
    """What preflight needs of a CRD on the cluster."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    managers: tuple[str, ...]  # field managers (kubectl, helm, ...)
    served_versions: tuple[str, ...]
    schemas: Mapping[str, Mapping[str, Any]]  # version -> openAPIV3Schema

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Crd:
        meta = obj.get("metadata") or {}
        versions = (obj.get("spec") or {}).get("versions") or []
        return cls(
            name=str(meta.get("name", "")),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            managers=tuple(
                sorted({str(m.get("manager", "")) for m in meta.get("managedFields") or []} - {""})
            ),
            served_versions=tuple(str(v.get("name")) for v in versions if v.get("served")),
            schemas={
                str(v.get("name")): (v.get("schema") or {}).get("openAPIV3Schema") or {} for v in versions
            },
        )

    @property
    def phalanx(self) -> bool:
        return self.labels.get(OWNER_LABEL[0]) == OWNER_LABEL[1]

    def owner(self) -> str:
        """Who installed it, as far as its metadata says."""
        release = self.annotations.get("meta.helm.sh/release-name")
        if release:
            namespace = self.annotations.get("meta.helm.sh/release-namespace", "")
            return f"Helm release {namespace + '/' if namespace else ''}{release}"
        for key in ("app.kubernetes.io/part-of", "app.kubernetes.io/name", "app.kubernetes.io/managed-by"):
            if self.labels.get(key):
                return f"{key}={self.labels[key]}"
        if self.managers:
            return "field managers " + ", ".join(self.managers)
        return "unknown"


@dataclass(frozen=True)
class Finding:
    level: str  # error: blocks the install; conflict: a piece not to apply; ok
    subject: str
    message: str

    def data(self) -> dict[str, str]:
        return {"level": self.level, "subject": self.subject, "message": self.message}


@dataclass(frozen=True)
class Verdict:
    findings: tuple[Finding, ...]
    apply: tuple[str, ...]  # release files to apply, in order
    helm_values: Mapping[str, bool]

    @property
    def blocked(self) -> bool:
        return any(f.level == ERROR for f in self.findings)

    def data(self) -> dict[str, Any]:
        return {
            "blocked": self.blocked,
            "findings": [f.data() for f in self.findings],
            "apply": list(self.apply),
            "helmValues": dict(self.helm_values),
        }


def parse_version(info: Mapping[str, Any]) -> tuple[int, int] | None:
    """(major, minor) from /version (``gitVersion`` v1.35.4, else major/minor such as "30+")."""
    found = re.match(r"v?(\d+)\.(\d+)", str(info.get("gitVersion", "")))
    if found:
        return int(found[1]), int(found[2])
    major, minor = re.match(r"\d+", str(info.get("major", ""))), re.match(r"\d+", str(info.get("minor", "")))
    return (int(major[0]), int(minor[0])) if major and minor else None


def _version_finding(version: tuple[int, int] | None) -> Finding:
    floor = "{}.{}".format(*MIN_KUBERNETES)
    if version is None:
        return Finding(ERROR, "kubernetes", f"cannot read the server version; Phalanx needs >= {floor}")
    shown = "{}.{}".format(*version)
    if version < MIN_KUBERNETES:
        return Finding(
            ERROR,
            "kubernetes",
            f"{shown} is below {floor}: the ValidatingAdmissionPolicies that guard the scheduling gate "
            "need admissionregistration.k8s.io/v1, so anyone could lift a gang's gate; "
            f"upgrade to >= {floor}",
        )
    return Finding(
        OK, "kubernetes", f"{shown} (>= {floor}: the admission policies guarding the gate are served)"
    )


def _schema_problems(crd: Crd, piece: Piece) -> list[str]:
    """What Phalanx writes that the other project's CRD cannot hold."""
    version = piece.version_of(crd.name)
    if version not in crd.served_versions:
        served = ", ".join(crd.served_versions) or "none"
        return [f"it serves {served}, not {version}, which Phalanx reads and writes"]
    if not crd.name.startswith("podgroups."):
        return []
    status = (crd.schemas.get(version, {}).get("properties") or {}).get("status") or {}
    problems = []
    phases = ((status.get("properties") or {}).get("phase") or {}).get("enum")
    if phases:
        missing = [p for p in WRITTEN_PHASES if p not in phases]
        if missing:
            problems.append(f"its status.phase enum lacks {', '.join(missing)}, which Phalanx sets")
    return problems


def _dropped_status(crd: Crd, piece: Piece) -> list[str]:
    """Status fields Phalanx writes that the other CRD's schema prunes (kept: phase and counts)."""
    status = (crd.schemas.get(piece.version_of(crd.name), {}).get("properties") or {}).get("status") or {}
    if not crd.name.startswith("podgroups.") or status.get("x-kubernetes-preserve-unknown-fields"):
        return []
    known = status.get("properties") or {}
    return [name for name in WRITTEN_STATUS if name not in known]


def _piece_findings(piece: Piece, present: Mapping[str, Crd], release: str) -> tuple[list[Finding], bool]:
    """(findings, whether to install the piece) for one compatibility group."""
    findings: list[Finding] = []
    foreign = [present[name] for name in piece.crds if name in present and not present[name].phalanx]
    ours = [name for name in piece.crds if name in present and present[name].phalanx]
    for crd in foreign:
        problems = _schema_problems(crd, piece)
        advice = (
            f"served by another project's CRD ({crd.owner()}); Phalanx leaves it as it is and works "
            f"with the objects it serves: do not apply {piece.file(release)} "
            f"(the Helm chart skips it; {piece.helm_value}=auto)"
        )
        findings.append(Finding(CONFLICT, crd.name, advice))
        if problems and piece.default:  # the group Phalanx makes every gang's PodGroup in
            findings.append(
                Finding(
                    ERROR,
                    crd.name,
                    f"Phalanx cannot work with this CRD: {'; '.join(problems)}. Phalanx makes every "
                    f"gang's PodGroup in {piece.group}/{piece.version}",
                )
            )
        elif problems:
            findings.append(
                Finding(
                    CONFLICT,
                    crd.name,
                    f"{'; '.join(problems)}: Phalanx does not read these objects ({piece.who} does)",
                )
            )
        dropped = _dropped_status(crd, piece)
        if dropped and not problems:
            findings.append(
                Finding(
                    CONFLICT,
                    crd.name,
                    f"its schema drops status.{', status.'.join(dropped)}: read why a gang waits from "
                    "its Events or `kubectl phalanx explain`",
                )
            )
    if foreign:
        return findings, False
    if ours:
        findings.append(
            Finding(OK, piece.group, f"served by Phalanx's CRDs; apply {piece.file(release)} to upgrade")
        )
        return findings, True
    if piece.default:
        findings.append(Finding(OK, piece.group, f"not served yet: {piece.file(release)} installs it"))
        return findings, True
    findings.append(
        Finding(
            OK,
            piece.group,
            f"not served; optional: {piece.file(release)} serves manifests written for {piece.who}",
        )
    )
    return findings, False


def decide(version: tuple[int, int] | None, crds: Iterable[Crd], release: str) -> Verdict:
    """The findings, and the files (and Helm values) that install ``release`` safely here."""
    present = {crd.name: crd for crd in crds}
    findings = [_version_finding(version)]
    for name in OWN_CRDS:
        crd = present.get(name)
        if crd is not None and not crd.phalanx:
            findings.append(
                Finding(
                    ERROR,
                    name,
                    f"Phalanx's own CRD is held by another project ({crd.owner()}); "
                    "applying Phalanx would replace it: remove it first or do not install Phalanx here",
                )
            )
    apply: list[str] = []
    helm: dict[str, bool] = {}
    for piece in PIECES:
        piece_findings, install = _piece_findings(piece, present, release)
        findings.extend(piece_findings)
        helm[piece.helm_value] = install
        if install:
            apply.append(piece.file(release))
    apply.append(f"phalanx-{release}.yaml")
    return Verdict(tuple(findings), tuple(apply), helm)


def text(verdict: Verdict) -> str:
    width = max(len(f.level) for f in verdict.findings)
    lines = [f"{f.level.upper().ljust(width)}  {f.subject}: {f.message}" for f in verdict.findings]
    if verdict.blocked:
        lines += ["", "Do not install Phalanx here until the errors above are resolved."]
    else:
        lines += ["", "Install this release with:"]
        lines += [f"  kubectl apply --server-side -f {name}" for name in verdict.apply]
    return "\n".join(lines)


def release_version() -> str:
    """The release this plugin belongs to (the files it names carry it)."""
    for distribution in ("phalanx", "phalanx-kubectl"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return "<version>"


async def read(kube: KubeClient) -> tuple[tuple[int, int] | None, list[Crd]]:
    """The server's version and the CRDs preflight judges (those present)."""
    version = parse_version(await kube.server_version())
    names = [*OWN_CRDS, *(name for piece in PIECES for name in piece.crds)]
    crds = []
    for name in names:
        try:
            crds.append(Crd.from_object(await kube.get(CRDS, None, name)))
        except ApiError as err:
            if not err.not_found:
                raise
    return version, crds


async def command(kube: KubeClient, output: str, release: str | None = None) -> tuple[str, int]:
    """(what to print, exit code): 1 when something blocks the install."""
    version, crds = await read(kube)
    verdict = decide(version, crds, release or release_version())
    shown = text(verdict) if output == "table" else dump(verdict.data(), output)
    return shown, 1 if verdict.blocked else 0


def names(pieces: Sequence[Piece] = PIECES) -> list[str]:
    """Every CRD a compatibility piece installs."""
    return [name for piece in pieces for name in piece.crds]
