"""``python -m deploy.release`` (``make release``): every release artefact into ``dist/``.

dist/phalanx-<v>.yaml                              the install (built-in certificates)
dist/phalanx-<v>-cert-manager.yaml                 the install with cert-manager certificates
dist/phalanx-<v>-compat-<group>.yaml               each compatibility group's CRDs, separately
dist/phalanx-<v>.tgz                               the Helm chart (same objects)
dist/phalanx-<v>-image.oci.tar                     the image, tagged as the manifests name it
dist/phalanx_kubectl-<v>-py3-none-any.whl          the kubectl plugin, with only its dependencies
dist/SHA256SUMS
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from deploy.release import chart, image, manifests, wheel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=manifests.REPO / "dist")
    parser.add_argument(
        "--no-image", action="store_true", help="skip the image archive (no container engine)"
    )
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    rendered = manifests.build()
    version = rendered.version
    named = manifests.images(obj for objs in rendered.core.values() for obj in objs)
    if len(named) != 1:
        raise SystemExit(f"the manifests name {sorted(named)}; a release ships exactly one image")
    (tag,) = named
    artefacts = [*manifests.write(rendered, out), chart.write(rendered, out), wheel.write(version, out)]
    if not args.no_image:
        archive = image.build(tag, out, version)
        found = image.references(archive)
        if tag not in found:
            raise SystemExit(f"{archive} is tagged {sorted(found)}, the manifests name {tag}")
        artefacts.append(archive)
    sums = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in sorted(artefacts))
    (out / "SHA256SUMS").write_text(sums)
    for path in sorted(artefacts):
        print(f"{path.stat().st_size:>12,} B  {path}")
    if args.no_image:
        print(f"(no image archive: --no-image; the manifests name {tag})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
