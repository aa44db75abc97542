"""``python -m app.client.cli``: the ``labelserve`` command."""

from app.client.cli import main

main()
