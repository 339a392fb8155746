"""The simulation drives the pure core only: it never pulls in the controller's async shell."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("asyncio", "aiohttp", "kubernetes_asyncio", "controller.app", "controller.reconciler")


def test_the_simulation_imports_no_async_shell() -> None:
    code = (
        "import sys\n"
        "import tests.simulation, tests.simulation.__main__\n"
        f"print(','.join(m for m in {FORBIDDEN!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
