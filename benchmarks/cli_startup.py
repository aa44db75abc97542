"""Start-up cost of the ``labelserve`` command: CPU and wall time of ``--version``, ``--help`` and
simple calls.

Each command runs ``--runs`` times as a fresh process (``sys.executable -m app.client.cli ...``, as the
installed script does) after one unmeasured warm-up run, which also writes the bytecode caches an
installed package has (``PYTHONDONTWRITEBYTECODE`` is dropped for the runs). The table gives, in
seconds, the best and the median CPU time (user + system of the process, from ``getrusage``) and wall
time. CPU time hardly moves when other jobs share the machine (waiting for a core is not counted),
so it is the figure to compare on a loaded machine, and its best is the one docs/cli.md records;
the wall time is the one to compare on a quiet one. ``python -c pass`` is the floor: the
interpreter's own start-up. The simple calls go to a closed port (127.0.0.1:9), so they measure
start-up, argument parsing and one refused connection, not a server.

``--tree DIR`` (repeatable) measures the ``app`` package of another source tree too (for
instance ``git archive main | tar -x -C /tmp/main``), in the same run, the trees taking turns
run by run, so that a before/after comparison sees the same machine load.

Run: ``.venv/bin/python -m benchmarks.cli_startup [--runs 5] [--tree /tmp/main]``. ``python -X
importtime -m app.client.cli --version`` says which imports the time goes to.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS: list[list[str]] = [
    ["-c", "pass"],
    ["-m", "app.client.cli", "--version"],
    ["-m", "app.client.cli", "--help"],
    ["-m", "app.client.cli", "compare", "--help"],
    ["-m", "app.client.cli", "datasets", "upload", "--help"],
    ["-m", "app.client.cli", "--url", "http://127.0.0.1:9", "datasets", "list"],
    ["-m", "app.client.cli", "--url", "http://127.0.0.1:9", "models", "show", "m@1"],
]


def run(command: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """The wall and CPU seconds of one run of ``command`` (stdout and stderr discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # microseconds, where os.times counts 10 ms ticks
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(args: list[str], trees: list[str], runs: int) -> dict[str, tuple[list[float], list[float]]]:
    """Per tree, the wall and CPU seconds of each run of ``python ARGS`` run in that tree, after one
    warm-up run each; the trees take turns."""
    command = [sys.executable, *args]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    for tree in trees:
        run(command, tree, env)
    times: dict[str, tuple[list[float], list[float]]] = {tree: ([], []) for tree in trees}
    for _ in range(runs):
        for tree in trees:
            wall, cpu = run(command, tree, env)
            times[tree][0].append(wall)
            times[tree][1].append(cpu)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tree", action="append", default=[], help="another source tree to measure")
    options = parser.parse_args()
    here = str(Path(__file__).resolve().parent.parent)
    trees = [here, *options.tree]
    print("| command | tree | CPU best s | CPU median s | wall best s | wall median s |")
    print("|---|---|---:|---:|---:|---:|")
    for args in COMMANDS:
        shown = "python -c pass" if args[0] == "-c" else "labelserve " + " ".join(args[2:])
        for tree, (wall, cpu) in measure(args, trees, options.runs).items():
            label = "this" if tree == here else tree
            print(
                f"| `{shown}` | {label} | {min(cpu):.3f} | {statistics.median(cpu):.3f} "
                f"| {min(wall):.3f} | {statistics.median(wall):.3f} |"
            )


if __name__ == "__main__":
    main()
