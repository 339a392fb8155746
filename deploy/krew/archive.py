"""The krew archive of kubectl phalanx and its manifest, from the plugin's wheel.

    python deploy/krew/archive.py dist/phalanx-0.1.0-py3-none-any.whl [--out dist] [--url URL]

writes ``kubectl-phalanx-<version>.tar.gz`` (the launcher beside this file and the wheel) and
``phalanx-krew.yaml``: ``phalanx.yaml`` with the version, the archive's URL (``--url``, where the
release publishes it; default: the archive's file URL) and its sha256. The archive is byte-for-byte
reproducible (fixed times and owners), so its sha256 is too.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import sys
import tarfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
LAUNCHER = HERE / "kubectl-phalanx"
TEMPLATE = HERE / "phalanx.yaml"


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def build(wheel: Path, out: Path, url: str | None = None) -> tuple[Path, Path]:
    """The archive and the manifest for ``wheel`` (named ``phalanx-<version>-...whl``)."""
    version = wheel.name.split("-")[1]
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"kubectl-phalanx-{version}.tar.gz"
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w") as tar:
        _add(tar, LAUNCHER.name, LAUNCHER.read_bytes(), 0o755)
        _add(tar, wheel.name, wheel.read_bytes(), 0o644)
    with archive.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as zipped:
        zipped.write(packed.getvalue())
    manifest = yaml.safe_load(TEMPLATE.read_text())
    manifest["spec"]["version"] = f"v{version}"
    for platform in manifest["spec"]["platforms"]:
        platform["uri"] = url or archive.resolve().as_uri()
        platform["sha256"] = hashlib.sha256(archive.read_bytes()).hexdigest()
    written = out / "phalanx-krew.yaml"
    header = f"# kubectl krew install --manifest={written.name} --archive={archive.name}\n"
    written.write_text(header + yaml.safe_dump(manifest, sort_keys=False))
    return archive, written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--out", type=Path, default=Path("dist"))
    parser.add_argument("--url", help="where the release publishes the archive")
    args = parser.parse_args(argv)
    archive, manifest = build(args.wheel, args.out, args.url)
    print(f"{archive}\n{manifest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
