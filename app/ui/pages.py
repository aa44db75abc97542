"""What every page of the dashboard shares: the templates and their filters, rendering a page
(with its CSRF token and a session), the error page, reading a posted form once its token checks
out, the checks of path parameters, error texts, a report's answer and the pager's links.

The routes are in ``app.ui.routes`` (sign-in, overview, jobs, reports, train, compare, predict)
and ``app.ui.browse`` (datasets, models, versions: their pages and their actions).
"""

from __future__ import annotations

import functools
import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError
from starlette.datastructures import FormData

from app import __version__
from app.api import access
from app.api.headers import report_policy
from app.errors import DomainError, InvalidInput
from app.evaluation import reports
from app.scoring import LOWER_IS_BETTER
from app.ui import session
from app.upload_options import UPLOAD_OPTIONS

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")

#: the dashboard's icon (each page links it: a browser asking for /favicon.ico had logged a 404)
FAVICON = "/ui/static/favicon.svg"
#: rows of a listing page
PAGE = 25


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _num(value: Any, digits: int = 4) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return f"{value:.{digits}f}"
    return "-"


templates.env.filters["when"] = when
templates.env.filters["num"] = _num
templates.env.filters["pct"] = lambda v: f"{100 * float(v):.0f}%"
templates.env.filters["q"] = lambda v: quote(str(v), safe="")
templates.env.globals["version"] = __version__
templates.env.globals["upload_options"] = UPLOAD_OPTIONS
templates.env.globals["int_type"] = int
templates.env.globals["lower"] = LOWER_IS_BETTER


def render(
    request: Request, name: str, context: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
) -> HTMLResponse:
    """A page, with the CSRF token its forms carry (and a session, for a browser that has none)."""
    current, cookie = session.current(request), None
    if current is None:
        current, cookie = session.sessions(request).new()
    response = templates.TemplateResponse(
        request,
        name,
        {
            "csrf": session.sessions(request).csrf_token(current),
            "key_required": request.app.state.settings.has_api_keys,
            "may": functools.partial(access.may, request),
            **context,
        },
        status_code=status,
        headers=headers,
    )
    if cookie is not None:
        session.keep(request, response, cookie)
    return response


def failure(request: Request, exc: DomainError) -> HTMLResponse:
    return render(request, "error.html", {"title": "Not possible", "message": str(exc)}, exc.status_code)


def offset_of(request: Request) -> int:
    raw = request.query_params.get("offset", "0")
    return int(raw) if raw.isdigit() and len(raw) < 12 else 0


async def posted_form(request: Request) -> FormData | Response:
    """The posted form once its CSRF token checks out, else the refusal page."""
    form = await request.form()
    if not session.csrf_ok(request, form):
        return render(
            request, "error.html", {"title": "Form expired", "message": "reload the page and send it again"}, 403
        )
    return form


def form_text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def see(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def report_response(request: Request, stored: str, filename: str, back: tuple[str, str]) -> HTMLResponse:
    """A stored report as a page that loads plotly from the cached asset, under the dashboard's
    bar (its name, the way ``back`` (address, label) to the page it was opened from, the favicon),
    or with ``?download=1`` as the file to keep: the bundle inlined, so that it opens offline.
    Either with the policy allowing the scripts it inlines (``report_policy``)."""
    if request.query_params.get("download") == "1":
        page = reports.with_scripts(stored)
        disposition = {"Content-Disposition": f'attachment; filename="{filename}"'}
    else:
        download = f"{request.url.path}?{urlencode({**request.query_params, 'download': '1'})}"
        page = reports.linked(stored, f"/ui/assets/{reports.plotly_asset()[0]}", download)
        page = page.replace("</head>", f'<link rel="icon" href="{FAVICON}" type="image/svg+xml"></head>', 1)
        bar = templates.get_template("_report_bar.html").render(back=back[0], label=back[1])
        page = page.replace("<body>", "<body>" + bar, 1)
        disposition = {}
    return HTMLResponse(page, headers={"Content-Security-Policy": report_policy(page), **disposition})


async def threaded(function: Any, *args: Any) -> Any:
    return await run_in_threadpool(function, *args)


def check_path(value: str, pattern: str, field: str) -> None:
    if not re.fullmatch(pattern, value):
        raise InvalidInput(f"{field}: '{value[:80]}' is not a valid {field}", loc=("path", field))


def domain_text(exc: DomainError) -> str:
    where = ".".join(str(p) for p in exc.loc if p not in ("body", "path", "query"))
    return f"{where}: {exc}" if where and not str(exc).startswith(where) else str(exc)


def pydantic_text(exc: ValidationError) -> str:
    return "; ".join(".".join(str(p) for p in e["loc"]) + ": " + e["msg"] for e in exc.errors(include_url=False)[:5])


def page_links(
    offset: int, limit: int, next_offset: int | None, extra: dict[str, str] | None = None, total: int | None = None
) -> dict[str, str]:
    """The previous and next page's query strings of a listing (the filters of ``extra`` kept),
    and with ``total`` the page's number and the number of pages."""
    links = {}
    if offset > 0:
        links["previous"] = "?" + urlencode({**(extra or {}), "offset": max(0, offset - limit)})
    if next_offset is not None:
        links["next"] = "?" + urlencode({**(extra or {}), "offset": next_offset})
    if total is not None:
        links["number"] = str(offset // limit + 1)
        links["pages"] = str(max(1, math.ceil(total / limit)))
    return links


templates.env.globals["page_links"] = page_links
