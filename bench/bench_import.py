"""Import cost of windowguard (issue 22/21): ``import windowguard`` and its first use.

Every measurement is a fresh interpreter (``sys.executable``), so nothing is cached in
``sys.modules``; the ``.pyc`` files are warm (one untimed run of each case first). Cases:

* ``import windowguard``;
* ``import windowguard as wg; wg.ContextWindowManager`` (the common first use: the
  package's names are imported on first access, PEP 562).

Per case, over ``--runs`` repetitions (default 21; the cases and a bare ``python -c pass``
run round-robin, so a slow moment of the machine hits them all):

* **windowguard ms**: median of windowguard's own cumulative import time from
  ``-X importtime``: the top-level ``windowguard`` line plus every top-level line after
  it (what the first attribute access imported, which ``-X importtime`` does not nest
  under ``windowguard``);
* **wall ms**: median wall time of ``python -c <case>`` (no ``-X importtime``) minus the
  median wall time of ``python -c pass``;
* **loaded**: which of the heavy modules the case left in ``sys.modules`` (checked in
  the subprocess; the same in every run).

Target: ``import windowguard`` under 100 ms and none of the heavy modules loaded.

    .venv/bin/python bench/bench_import.py [--runs 21]
    .venv/bin/python bench/bench_import.py --src /path/to/other/checkout/src   # e.g. before
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HEAVY = ("asyncio", "sqlite3", "ssl", "http.client", "email", "openai", "anthropic", "httpx")
CASES = {
    "import windowguard": "import windowguard",
    "import windowguard as wg; wg.ContextWindowManager": (
        "import windowguard as wg; wg.ContextWindowManager"
    ),
}
TARGET_MS = 100.0
TARGET_CASE = "import windowguard"
_REPORT = "import sys; print(','.join(m for m in {heavy!r} if m in sys.modules))"


def environment(src: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return env


def importtime_ms(stderr: str) -> float:
    """windowguard's cumulative import time: the top-level ``windowguard`` line and every
    top-level line after it (what later attribute accesses imported)."""
    total_us, started = 0, False
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        top_level = not name[1:].startswith(" ")
        if not top_level:
            continue
        started = started or name.strip() == "windowguard"
        if started:
            total_us += int(cumulative)
    if not started:
        raise RuntimeError("no top-level 'windowguard' line in the -X importtime output")
    return total_us / 1000


def importtime_run(code: str, env: dict[str, str]) -> tuple[float, list[str]]:
    report = _REPORT.format(heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"{code}\n{report}"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    loaded = [m for m in done.stdout.strip().split(",") if m]
    return importtime_ms(done.stderr), loaded


def wall_run(code: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return (time.perf_counter() - start) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=21, help="repetitions per case (>= 15)")
    parser.add_argument(
        "--src", help="a src/ directory to import windowguard from (PYTHONPATH), e.g. before"
    )
    args = parser.parse_args()
    env = environment(args.src)

    where = subprocess.run(
        [sys.executable, "-c", "import windowguard; print(windowguard.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.strip()
    for code in CASES.values():  # warm the .pyc files
        importtime_run(code, env)
        wall_run(code, env)

    baseline: list[float] = []
    own: dict[str, list[float]] = {case: [] for case in CASES}
    wall: dict[str, list[float]] = {case: [] for case in CASES}
    loaded: dict[str, set[str]] = {case: set() for case in CASES}
    for _ in range(args.runs):
        baseline.append(wall_run("pass", env))
        for case, code in CASES.items():
            ms, modules = importtime_run(code, env)
            own[case].append(ms)
            loaded[case].update(modules)
            wall[case].append(wall_run(code, env))
    base = statistics.median(baseline)

    print(f"windowguard from {where}; Python {sys.version.split()[0]}; {args.runs} runs each")
    print(f"baseline `python -c pass`: median {base:.1f} ms wall\n")
    print("| case | windowguard ms (-X importtime) | wall ms over `pass` | loaded |")
    print("| --- | ---: | ---: | --- |")
    for case in CASES:
        heavy = ", ".join(m for m in HEAVY if m in loaded[case]) or "none"
        print(
            f"| `{case}` | {statistics.median(own[case]):.1f} | "
            f"{statistics.median(wall[case]) - base:.1f} | {heavy} |"
        )
    ms = statistics.median(own[TARGET_CASE])
    heavy = [m for m in HEAVY if m in loaded[TARGET_CASE]]
    met = ms < TARGET_MS and not heavy
    print(
        f"\nTarget: import windowguard < {TARGET_MS:.0f} ms, none of {', '.join(HEAVY)} "
        f"loaded -- {'met' if met else 'missed'} ({ms:.1f} ms"
        + (f"; loaded: {', '.join(heavy)})" if heavy else ")")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
