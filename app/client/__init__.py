"""The Python client of the HTTP API (``Client``) and the ``labelserve`` command built on it."""

from app.client.http import ApiError, Client

__all__ = ["ApiError", "Client"]
