"""The install manifests: each variant's kustomize overlay rendered once, the compatibility CRDs
split into their own files (``controller.cli.preflight.PIECES``: apply them only where nobody else
serves their group), the rest as the single core manifest of that variant."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.cli.preflight import PIECES, Piece

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
Obj = dict[str, Any]

# Variant name (the file's suffix; "" is the default) -> overlay under deploy/.
VARIANTS = {"": "default", "cert-manager": "with-cert-manager"}
# Compatibility group -> the kustomize component that serves it.
COMPONENTS = {
    "scheduling.sigs.k8s.io": "components/crds",
    "scheduling.x-k8s.io": "components/crds-x-k8s",
    "scheduling.run.ai": "components/kai-compat",
    "scheduling.volcano.sh": "components/volcano-compat",
}


def version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def kubectl() -> str:
    """$KUBECTL, else the one tests/localcluster builds, else kubectl on PATH."""
    if os.environ.get("KUBECTL"):
        return os.environ["KUBECTL"]
    built = sorted(glob.glob(os.path.expanduser("~/.cache/phalanx/bin/*/kubectl")))
    found = built[-1] if built else shutil.which("kubectl")
    if found is None:
        raise SystemExit(
            "make release renders deploy/ with `kubectl kustomize`: set KUBECTL, put kubectl on PATH "
            "or run `make binaries`"
        )
    return found


def kustomize(directory: Path) -> list[Obj]:
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"kubectl kustomize {directory} failed:\n{result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def component(path: str) -> list[Obj]:
    """A component rendered alone (an overlay with nothing but it)."""
    with tempfile.TemporaryDirectory() as tmp:
        relative = os.path.relpath(DEPLOY / path, tmp)
        (Path(tmp) / "kustomization.yaml").write_text(
            f"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n  - {relative}\n"
        )
        return kustomize(Path(tmp))


def key(obj: Obj) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


@dataclass(frozen=True)
class Manifests:
    version: str
    core: dict[str, list[Obj]]  # variant -> its objects without the compatibility CRDs
    pieces: dict[str, list[Obj]]  # compatibility group -> its CRDs
    rendered: dict[str, list[Obj]]  # variant -> everything its overlay renders

    def files(self) -> dict[str, list[Obj]]:
        """File name -> objects, for every manifest of the release."""
        out = {core_file(self.version, variant): objs for variant, objs in self.core.items()}
        for piece in PIECES:
            out[piece.file(self.version)] = self.pieces[piece.group]
        return out


def core_file(release: str, variant: str) -> str:
    return f"phalanx-{release}{'-' + variant if variant else ''}.yaml"


def _split(rendered: list[Obj], pieces: dict[str, list[Obj]]) -> list[Obj]:
    compat = {key(obj): obj for objs in pieces.values() for obj in objs}
    for obj in rendered:
        if key(obj) in compat and obj != compat[key(obj)]:
            raise SystemExit(f"{key(obj)} differs between its component and the overlay")
    return [obj for obj in rendered if key(obj) not in compat]


def build(release: str | None = None) -> Manifests:
    pieces = {piece.group: component(COMPONENTS[piece.group]) for piece in PIECES}
    for piece in PIECES:
        names = sorted(obj["metadata"]["name"] for obj in pieces[piece.group])
        if names != sorted(piece.crds):
            raise SystemExit(f"{COMPONENTS[piece.group]} renders {names}, preflight expects {piece.crds}")
    rendered = {variant: kustomize(DEPLOY / overlay) for variant, overlay in VARIANTS.items()}
    core = {variant: _split(objs, pieces) for variant, objs in rendered.items()}
    return Manifests(release or version(), core, pieces, rendered)


def header(release: str, name: str, piece: Piece | None) -> str:
    lines = [f"# Phalanx {release}: {name}"]
    if piece is None:
        lines.append("#   kubectl phalanx preflight            # first: what is already served here")
        lines.append(f"#   kubectl apply --server-side -f {name}")
    else:
        lines.append(f"# The CRDs of {piece.group} ({piece.who}). Apply only where no other project")
        lines.append("# serves this group (`kubectl phalanx preflight` says); never over another's CRD:")
        lines.append(f"#   kubectl apply --server-side -f {name}")
    return "\n".join(lines) + "\n"


def dump(objects: Iterable[Obj]) -> str:
    return "".join("---\n" + yaml.safe_dump(obj, sort_keys=False, width=120) for obj in objects)


def write(manifests: Manifests, out: Path) -> list[Path]:
    written = []
    by_file = {piece.file(manifests.version): piece for piece in PIECES}
    for name, objects in manifests.files().items():
        path = out / name
        path.write_text(header(manifests.version, name, by_file.get(name)) + dump(objects))
        written.append(path)
    return written


def images(objects: Iterable[Obj]) -> set[str]:
    """Every container image the objects name."""
    found = set()
    for obj in objects:
        spec = obj.get("spec", {}).get("template", {}).get("spec", {})
        for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            found.add(container["image"])
    return found
