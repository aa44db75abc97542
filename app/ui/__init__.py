"""The dashboard at ``/ui``: server-rendered pages (Jinja2) over the service layer, outside the JSON API."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.routing import BaseRoute

STATIC_PATH = "/ui/static"


def install(api: FastAPI) -> None:
    """Add the dashboard's pages, its assets and the redirect of ``/`` to it (none in the OpenAPI schema)."""
    from app.ui import browse, routes
    from app.ui.session import LoginThrottle

    api.state.login_throttle = LoginThrottle()
    api.include_router(routes.router)
    api.include_router(browse.router)
    api.mount(STATIC_PATH, StaticFiles(directory=Path(__file__).parent / "static"), name="ui-static")

    @api.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/ui", status_code=307)


def page_routes() -> list[BaseRoute]:
    """The dashboard's pages and forms, as declared (for the request gate's route roles)."""
    from app.ui import browse, routes

    return [*routes.router.routes, *browse.router.routes]
