"""`make bench`: every benchmark, each writing its figures to out/bench/*.json and printing them."""

from __future__ import annotations

import subprocess
import sys

BENCHES = (
    "bench_core",
    "bench_whatif",
    "bench_reconcile",
    "bench_memory",
    "bench_webhook",
    "bench_trace",
    "bench_cluster",
    "bench_failover",
)


def main(argv: list[str] | None = None) -> int:
    chosen = (argv if argv is not None else sys.argv[1:]) or list(BENCHES)
    failed = []
    for name in chosen:
        print(f"\n===== {name} =====", flush=True)
        # A fresh process each: memory figures must not include another benchmark's heap.
        if subprocess.run([sys.executable, "-m", f"tests.bench.{name}"], check=False).returncode:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
