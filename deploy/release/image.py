"""The image as an OCI archive, tagged exactly as the manifests name it."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

from deploy.release.manifests import REPO

IMAGE_SCRIPT = REPO / "tests/install/image.sh"


def archive_name(version: str) -> str:
    return f"phalanx-{version}-image.oci.tar"


def build(image: str, out: Path, version: str) -> Path:
    """Build ``image`` (tests/install/image.sh: docker or podman) and save it as an OCI archive."""
    path = out / archive_name(version)
    result = subprocess.run(
        ["bash", str(IMAGE_SCRIPT), "--oci", str(path)],
        env={**os.environ, "PHALANX_IMAGE": image},
        stdout=subprocess.DEVNULL,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(
            f"the image was not built (tests/install/image.sh exit {result.returncode}; see above)"
        )
    return path


def references(path: Path) -> set[str]:
    """The image names an OCI archive's index carries."""
    with tarfile.open(path) as archive:
        member = archive.extractfile("index.json")
        if member is None:
            raise SystemExit(f"{path} has no index.json: not an OCI archive")
        index = json.load(member)
    names = set()
    for manifest in index.get("manifests", []):
        annotations = manifest.get("annotations") or {}
        for key in ("io.containerd.image.name", "org.opencontainers.image.ref.name"):
            if key in annotations:
                names.add(annotations[key])
    return names
