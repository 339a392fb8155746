"""The Helm chart, made from the same rendered manifests as the plain install.

Every object becomes one template; only a few values are substituted: the namespace (everywhere
the manifests spell it, the admission policies' CEL included), the image, the replicas, and which
certificate source (the objects that differ between the default and cert-manager variants are
switched by ``certManager.enabled``). The compatibility CRDs follow preflight's rule through
Helm's ``lookup``: another project's CRD of the same name is never replaced.
"""

from __future__ import annotations

import copy
import gzip
import io
import re
import tarfile
from collections.abc import Iterable
from pathlib import Path

import yaml

from controller.cli.preflight import MIN_KUBERNETES, OWNER_LABEL, PIECES, Piece
from deploy.release.manifests import Manifests, Obj, key

NAME = "phalanx"
NAMESPACE = "phalanx-system"
IMAGE_REPOSITORY = "localhost/phalanx"
# helm.sh/resource-policy: keep — uninstalling the chart must not delete the CRDs, and with them
# every PodGroup and Queue users wrote.
KEEP = {"helm.sh/resource-policy": "keep"}
_TOKEN = re.compile(r"'@@([a-zA-Z.]+)@@'")


def values(manifests: Manifests) -> str:
    tag = manifests.version
    compat = "\n".join(
        f"  {piece.helm_value.split('.', 1)[1]}: {'auto' if piece.default else 'false'}"
        f"  # {piece.group} ({piece.who})"
        for piece in PIECES
    )
    return f"""# Where Phalanx runs: every namespaced object, the ServiceAccount the admission policies
# name, and the namespaces the webhook skips.
namespace:
  name: {NAMESPACE}
  create: true  # the Namespace object (restricted Pod Security); false when it exists already
image:
  repository: {IMAGE_REPOSITORY}
  tag: "{tag}"
  pullPolicy: IfNotPresent
webhook:
  replicas: 2
controller:
  replicas: 2  # one leads (Lease), the others stand by
certManager:
  enabled: false  # certificates from cert-manager (installed first) instead of the built-in bootstrap
# The CRDs of API groups other projects serve too (`kubectl phalanx preflight` reports them).
#   auto:  install unless another project's CRD is there; Phalanx then works with the objects it serves
#   true:  install, and fail the install if another project's CRD is there (it is never replaced)
#   false: do not install
compat:
{compat}
"""


def chart_yaml(manifests: Manifests) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v2",
            "name": NAME,
            "description": "All-or-nothing (gang) scheduling for AI/ML jobs on the stock kube-scheduler",
            "type": "application",
            "version": manifests.version,
            "appVersion": manifests.version,
            # The ValidatingAdmissionPolicies that guard the gate need admissionregistration.k8s.io/v1.
            "kubeVersion": ">= {}.{}.0-0".format(*MIN_KUBERNETES),
        },
        sort_keys=False,
    )


def _tokens(obj: Obj, release: str) -> Obj:
    """``obj`` with the values the chart sets replaced by '@@name@@' tokens."""
    obj = copy.deepcopy(obj)
    if obj["kind"] == "CustomResourceDefinition":
        obj["metadata"].setdefault("annotations", {}).update(KEEP)
    if obj["kind"] == "Deployment":
        component = obj["metadata"]["name"].removeprefix(f"{NAME}-")
        obj["spec"]["replicas"] = f"@@{component}.replicas@@"
        pod = obj["spec"]["template"]["spec"]
        for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            if container["image"] != f"{IMAGE_REPOSITORY}:{release}":
                raise SystemExit(f"unexpected image {container['image']} in {key(obj)}")
            container["image"] = "@@image@@"
            if "imagePullPolicy" in container:
                container["imagePullPolicy"] = "@@image.pullPolicy@@"
    return obj


def _expression(token: str) -> str:
    if token == "image":
        return '"{{ .Values.image.repository }}:{{ .Values.image.tag }}"'
    if token.endswith(".replicas"):
        return "{{ .Values." + token + " | int }}"
    return '"{{ .Values.' + token + ' }}"'


def template(obj: Obj, release: str) -> str:
    """One object as a template body."""
    text = yaml.safe_dump(_tokens(obj, release), sort_keys=False, width=120)
    if "{{" in text or "}}" in text:
        raise SystemExit(f"{key(obj)} contains template braces; escape them before making the chart")
    text = _TOKEN.sub(lambda found: _expression(found[1]), text)
    if "@@" in text:
        raise SystemExit(f"a value token was left in {key(obj)}")
    return text.replace(NAMESPACE, "{{ .Values.namespace.name }}")


def _guarded(body: str, condition: str) -> str:
    return f"{{{{- if {condition} }}}}\n{body}{{{{- end }}}}\n"


def _piece_template(piece: Piece, objects: Iterable[Obj], release: str) -> str:
    """The piece's CRDs unless another project's CRD of the same name exists (preflight's rule)."""
    value = f".Values.{piece.helm_value}"
    label, owner = OWNER_LABEL
    lines = ["{{- $foreign := list }}", "{{- $crd := dict }}"]
    for name in piece.crds:
        lines += [
            f'{{{{- $crd = lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" "{name}" }}}}',
            f'{{{{- if and $crd (ne (dig "metadata" "labels" "{label}" "" $crd) "{owner}") }}}}',
            f'{{{{- $foreign = append $foreign "{name}" }}}}',
            "{{- end }}",
        ]
    lines += [
        f"{{{{- $want := toString {value} }}}}",
        '{{- if and $foreign (eq $want "true") }}',
        f"{{{{- fail (printf \"%s: served by another project's CRD; Phalanx never replaces it. "
        f'Set {piece.helm_value}=auto or false: Phalanx then works with the objects it serves" '
        '(join ", " $foreign)) }}',
        "{{- end }}",
    ]
    body = "".join("---\n" + template(obj, release) for obj in objects)
    return (
        "\n".join(lines)
        + "\n"
        + _guarded(body, 'and (not $foreign) (or (eq $want "true") (eq $want "auto"))')
    )


def _file_name(obj: Obj) -> str:
    return f"{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def templates(manifests: Manifests) -> dict[str, str]:
    """templates/<file> -> text."""
    default = {key(obj): obj for obj in manifests.core[""]}
    cert_manager = {key(obj): obj for obj in manifests.core["cert-manager"]}
    out: dict[str, str] = {}
    release = manifests.version
    for k in [*default, *(k for k in cert_manager if k not in default)]:
        both = k in default and k in cert_manager and default[k] == cert_manager[k]
        variants = (
            [("", default[k])]
            if both
            else [
                *([("not .Values.certManager.enabled", default[k])] if k in default else []),
                *([(".Values.certManager.enabled", cert_manager[k])] if k in cert_manager else []),
            ]
        )
        obj = variants[0][1]
        text = ""
        for condition, variant in variants:
            body = template(variant, release)
            text += _guarded(body, condition) if condition else body
        if obj["kind"] == "Namespace":
            text = _guarded(text, ".Values.namespace.create")
        out[_file_name(obj)] = text
    for piece in PIECES:
        out[f"compat-{piece.group}.yaml"] = _piece_template(piece, manifests.pieces[piece.group], release)
    return out


NOTES = """Phalanx {{ .Chart.AppVersion }} runs in {{ .Values.namespace.name }}.
Opt a namespace in:  kubectl label namespace <name> phalanx.io/gang-scheduling=enabled
Check the install:   kubectl phalanx preflight
"""


def files(manifests: Manifests) -> dict[str, str]:
    """Path inside the chart -> text."""
    out = {
        "Chart.yaml": chart_yaml(manifests),
        "values.yaml": values(manifests),
        "templates/NOTES.txt": NOTES,
    }
    out.update({f"templates/{name}": text for name, text in templates(manifests).items()})
    return out


def write(manifests: Manifests, out: Path) -> Path:
    """dist/phalanx-<version>.tgz (reproducible: fixed times and owners)."""
    path = out / f"{NAME}-{manifests.version}.tgz"
    with (
        path.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive,
    ):
        for name, text in sorted(files(manifests).items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{NAME}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            archive.addfile(info, io.BytesIO(data))
    return path
