"""The ``labelserve`` command (``base`` holds the command object, its options and output).

One module per command group; importing them registers their commands on ``base.cli``.
"""

import sys

from app.client.cli import datasets, jobs, models, predicting, server  # noqa: F401 (registers the commands)
from app.client.cli.base import cli


def main() -> None:
    # httpx imports its own command line (rich, click and pygments: a fifth of a simple call's CPU)
    # unless that import fails, as where they are not installed; this process never runs it
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    cli()
