"""Start-up cost of the ``labelserve`` command: wall time of ``--help`` and of simple calls.

Each command runs ``--runs`` times as a fresh process (``sys.executable -m app.cli ...``, as the
installed script does) after one unmeasured warm-up run; the table gives the minimum and the
median wall time in milliseconds. The minimum is the figure to compare between two versions on
a shared machine (the median also counts waiting for a core). ``python -c pass`` is the floor: the
interpreter's own start-up. The simple calls go to a closed port (127.0.0.1:9), so they measure
start-up, argument parsing and one refused connection, not a server.

Run: ``.venv/bin/python -m benchmarks.cli_startup [--runs 20]``. ``python -X importtime -c 'import
app.cli'`` says which imports the time goes to.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS: list[list[str]] = [
    ["-c", "pass"],
    ["-m", "app.cli", "--version"],
    ["-m", "app.cli", "--help"],
    ["-m", "app.cli", "compare", "--help"],
    ["-m", "app.cli", "datasets", "upload", "--help"],
    ["-m", "app.cli", "--url", "http://127.0.0.1:9", "datasets", "list"],
    ["-m", "app.cli", "--url", "http://127.0.0.1:9", "models", "show", "m@1"],
]


def wall_times(args: list[str], runs: int) -> list[float]:
    """Seconds per run of ``python ARGS`` (stdout and stderr discarded), after one warm-up run."""
    command = [sys.executable, *args]
    subprocess.run(command, capture_output=True, check=False)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    print("| command | min ms | median ms |\n|---|---:|---:|")
    for args in COMMANDS:
        times = wall_times(args, runs)
        shown = "python -c pass" if args[0] == "-c" else "labelserve " + " ".join(args[2:])
        print(f"| `{shown}` | {min(times) * 1000:.0f} | {statistics.median(times) * 1000:.0f} |")


if __name__ == "__main__":
    main()
