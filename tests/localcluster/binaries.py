"""Find (and if needed build) the cached control-plane binaries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.localcluster.versions import KubeRelease

BUILD_SCRIPT = Path(__file__).with_name("build-binaries.sh")
REQUIRED = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "etcd",
    "kwok",
    "kwokctl",
)
# The opt-in real node (build-binaries.sh --node).
NODE_REQUIRED = ("kubelet", "kube-proxy", "phalanx-pause")


def ensure_binaries(release: KubeRelease, quiet: bool = False, node: bool = False) -> Path:
    """Run the idempotent build script for ``release`` and return the directory holding every binary.

    Warm, the script only checks the cache (well under a second); cold, it streams its progress
    to stderr so a half-hour build is never silent.
    """
    override = os.environ.get("PHALANX_BIN_DIR")
    if override:
        bin_dir = Path(override)
    else:
        result = subprocess.run(
            ["bash", str(BUILD_SCRIPT), *(["--node"] if node else [])],
            env={**os.environ, "K8S_VERSION": release.version},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if quiet else sys.stderr,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"building the control-plane binaries failed (exit {result.returncode})")
        bin_dir = Path(result.stdout.strip().splitlines()[-1])
    required = REQUIRED + (NODE_REQUIRED if node else ())
    missing = [name for name in required if not (bin_dir / name).is_file()]
    if missing:
        raise RuntimeError(f"{bin_dir} lacks {', '.join(missing)}; run {BUILD_SCRIPT}")
    return bin_dir
