"""The ``labelserve`` command (``base`` holds the command object, its options and output).

One module per command group; importing them registers their commands on ``base.cli``.
"""

from app.client.cli import datasets, jobs, models, predicting, server  # noqa: F401 (registers the commands)
from app.client.cli.base import cli


def main() -> None:
    cli()
