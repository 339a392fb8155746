"""Can this machine run the install tier? ``python -m tests.install.prereqs`` prints why not
(exit 1) or nothing (exit 0); ``make test`` uses it to run or skip the tier."""

from __future__ import annotations

import shutil
import sys

from tests.localcluster.realnode import missing_prerequisites


def why_not_here() -> str | None:
    """The reason this machine cannot run the install tier, or None."""
    missing = missing_prerequisites()
    if not (shutil.which("podman") or shutil.which("docker")):
        missing.append("podman or docker (to build the image)")
    return "; ".join(missing) or None


if __name__ == "__main__":
    reason = why_not_here()
    if reason:
        print(reason)
    sys.exit(1 if reason else 0)
