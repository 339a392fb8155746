"""The install manifests: every object kustomize renders is in exactly one file of the release, the
compatibility CRDs only in their own files, and one image, the one the image archive carries."""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import pytest
import yaml

from controller.cli.preflight import OWN_CRDS, PIECES
from deploy.release import image, manifests
from deploy.release.manifests import VARIANTS, core_file, key
from tests.unit.deploy.manifests import DEPLOY, kustomize

REPO = Path(__file__).resolve().parents[3]


def _objects(path: Path) -> list[dict[str, object]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.mark.parametrize(("variant", "overlay"), VARIANTS.items())
def test_each_variant_is_one_manifest_plus_the_compat_pieces_its_overlay_has(
    dist: Path, built: manifests.Manifests, variant: str, overlay: str
) -> None:
    core = _objects(dist / core_file(built.version, variant))
    pieces = {piece.group: _objects(dist / piece.file(built.version)) for piece in PIECES}
    rendered = kustomize(DEPLOY / overlay)  # independently of the builder
    compat = {key(obj) for objs in pieces.values() for obj in objs}
    assert not {key(obj) for obj in core} & compat, "a compatibility CRD is in the core manifest"
    in_overlay_pieces = [obj for objs in pieces.values() for obj in objs if obj in rendered]
    assert sorted(map(key, core + in_overlay_pieces)) == sorted(map(key, rendered))
    for obj in core:
        assert obj in rendered, key(obj)
    core_crds = {obj["metadata"]["name"] for obj in core if obj["kind"] == "CustomResourceDefinition"}
    assert core_crds == set(OWN_CRDS)


def test_each_compat_piece_holds_exactly_its_groups_crds(dist: Path, built: manifests.Manifests) -> None:
    for piece in PIECES:
        objects = _objects(dist / piece.file(built.version))
        assert sorted(obj["metadata"]["name"] for obj in objects) == sorted(piece.crds)
        assert {obj["spec"]["group"] for obj in objects} == {piece.group}
        assert all(obj["metadata"]["labels"]["app.kubernetes.io/name"] == "phalanx" for obj in objects)


def test_the_default_install_still_serves_scheduler_plugins_podgroups() -> None:
    """deploy/default (kustomize from the tree) is unchanged: on a cluster where nobody serves the
    group, seed manifests written for Coscheduling keep working."""
    names = {
        obj["metadata"]["name"]
        for obj in kustomize(DEPLOY / "default")
        if obj["kind"] == "CustomResourceDefinition"
    }
    assert names == {"podgroups.scheduling.sigs.k8s.io", "queues.scheduling.phalanx.io"}


def test_the_manifests_name_the_image_the_image_script_builds(built: manifests.Manifests) -> None:
    named = manifests.images(obj for objs in built.core.values() for obj in objs)
    assert named == {f"localhost/phalanx:{built.version}"}
    script = (REPO / "tests/install/image.sh").read_text()
    assert 'IMAGE="${PHALANX_IMAGE:-localhost/phalanx:$VERSION}"' in script
    assert re.search(r'save --format oci-archive -o "\$OCI" "\$IMAGE"', script)


def _oci_archive(path: Path, names: list[str]) -> Path:
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "annotations": {"org.opencontainers.image.ref.name": n},
            }
            for n in names
        ],
    }
    with tarfile.open(path, "w") as archive:
        data = json.dumps(index).encode()
        info = tarfile.TarInfo("index.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return path


def test_the_archive_check_reads_the_tag_an_oci_index_carries(tmp_path: Path) -> None:
    archive = _oci_archive(tmp_path / "a.tar", ["localhost/phalanx:0.1.0"])
    assert image.references(archive) == {"localhost/phalanx:0.1.0"}
    other = _oci_archive(tmp_path / "b.tar", ["0.1.0"])
    assert "localhost/phalanx:0.1.0" not in image.references(other)


def test_a_built_image_archive_carries_the_tag_the_manifests_name(built: manifests.Manifests) -> None:
    archive = REPO / "dist" / image.archive_name(built.version)
    if not archive.exists():
        pytest.skip(f"{archive.name} not built (make release)")
    assert f"localhost/phalanx:{built.version}" in image.references(archive)


def test_make_release_writes_every_artefact_and_their_checksums(
    tmp_path: Path, built: manifests.Manifests, capsys: pytest.CaptureFixture[str]
) -> None:
    from deploy.release.__main__ import main

    assert main(["--no-image", "--out", str(tmp_path)]) == 0
    v = built.version
    expected = {
        f"phalanx-{v}.yaml",
        f"phalanx-{v}-cert-manager.yaml",
        *(piece.file(v) for piece in PIECES),
        f"phalanx-{v}.tgz",
        f"phalanx_kubectl-{v}-py3-none-any.whl",
    }
    assert {p.name for p in tmp_path.iterdir()} == expected | {"SHA256SUMS"}
    sums = dict(line.split("  ")[::-1] for line in (tmp_path / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == expected
    assert "no image archive" in capsys.readouterr().err
