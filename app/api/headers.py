"""Security headers on every answer, and the Content-Security-Policy of HTML pages.

``SecurityHeaders``, a pure ASGI middleware (the prediction fast path in front of it adds the
constant ``NOSNIFF`` itself), adds ``X-Content-Type-Options: nosniff`` to every answer and, to
an HTML one, ``X-Frame-Options: DENY``, ``Referrer-Policy: same-origin`` and a
``Content-Security-Policy``: the route's own when it set one, else ``PAGE_POLICY``. Each
policy keeps scripts, styles and everything else to the service's own address
(``default-src 'self'``) and forbids framing (``frame-ancestors 'none'``):

* the dashboard's pages inline nothing (their script and stylesheet are files of
  ``/ui/static``; bars are SVG), so ``PAGE_POLICY`` allows no inline script or style;
* a report (``report_policy``) allows its inline scripts by their hashes (its charts' and, in
  the offline file, plotly's bundle), and inline styles, which plotly writes as it draws;
* the docs pages (FastAPI's Swagger UI and ReDoc, paths given as ``hashed_paths``) inline a
  script of their own: the middleware hashes the page as it is sent and allows that script,
  their libraries' inline styles, and ReDoc's search worker (made from a ``blob:`` URL).

The offline file a report downloads as carries no ``<meta>`` policy: a header does not travel
with a saved file, and the file opened from disk runs what it inlines.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.evaluation import reports

NOSNIFF = (b"x-content-type-options", b"nosniff")
_HTML_ONLY = ((b"x-frame-options", b"DENY"), (b"referrer-policy", b"same-origin"))
_CSP = b"content-security-policy"
_BASE = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)


def policy(scripts: Iterable[str] = (), inline_styles: bool = False, blob_workers: bool = False) -> str:
    """A page's policy: the base, plus inline scripts by their sources (``'sha256-...'``), inline
    styles when ``inline_styles``, and workers made from ``blob:`` URLs when ``blob_workers``."""
    parts = [_BASE]
    if sources := " ".join(scripts):
        parts.append(f"script-src 'self' {sources}")
    if inline_styles:
        parts.append("style-src 'self' 'unsafe-inline'")
    if blob_workers:
        parts.append("worker-src 'self' blob:")
    return "; ".join(parts)


PAGE_POLICY = policy()


def script_sources(page: str, known: Mapping[str, str] | None = None) -> list[str]:
    """The hash sources (``'sha256-...'``) of ``page``'s inline scripts, each once; ``known``:
    ``<script>`` elements whose source is already computed (plotly's 4.8 MB bundle, hashed once)."""
    sources: list[str] = []
    start = page.find("<script")
    while start != -1:
        element = next((e for e in known or () if page.startswith(e, start)), None)
        if element is not None and known is not None:
            sources.append(known[element])
            start = page.find("<script", start + len(element))
            continue
        opened = page.find(">", start) + 1
        end = page.find("</script>", opened)
        if not opened or end == -1:
            break
        if " src=" not in page[start:opened]:
            sources.append(_source(page[opened:end].encode()))
        start = page.find("<script", end)
    return list(dict.fromkeys(sources))


def report_policy(page: str) -> str:
    """The policy of a report as ``app.evaluation.reports`` finishes it (linked or inlined bundle)."""
    bundle, digest = reports.bundle_digest()
    return policy(script_sources(page, {bundle: f"'sha256-{digest}'"}), inline_styles=True)


def _source(script: bytes) -> str:
    return f"'sha256-{base64.b64encode(hashlib.sha256(script).digest()).decode()}'"


def secured(
    headers: Iterable[tuple[bytes, bytes]], page_policy: bytes = PAGE_POLICY.encode()
) -> list[tuple[bytes, bytes]]:
    """``headers`` with the security headers added: ``nosniff`` always; on an HTML answer the
    frame and referrer headers and ``page_policy`` unless the route set a policy itself."""
    out = list(headers)
    names = {name for name, _ in out}
    if NOSNIFF[0] not in names:
        out.append(NOSNIFF)
    if any(name == b"content-type" and value.startswith(b"text/html") for name, value in out):
        out += [header for header in _HTML_ONLY if header[0] not in names]
        if _CSP not in names:
            out.append((_CSP, page_policy))
    return out


class SecurityHeaders:
    """Adds the security headers to every HTTP answer (see the module's docstring)."""

    def __init__(self, app: ASGIApp, hashed_paths: Iterable[str] = ()) -> None:
        self.app = app
        self.hashed_paths = frozenset(hashed_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] in self.hashed_paths:
            await self._hashed(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": secured(message["headers"])}
            await send(message)

        await self.app(scope, receive, send_secured)

    async def _hashed(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A framework page, small and made of constants: held until complete, then sent with a
        policy that allows its inline scripts by their hashes."""
        start: Message = {}
        body = bytearray()

        async def send_hashed(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            body.extend(message.get("body", b""))
            if message.get("more_body", False):
                return
            page = body.decode("utf-8", "replace")
            page_policy = policy(script_sources(page), inline_styles=True, blob_workers=True)
            await send({**start, "headers": secured(start["headers"], page_policy.encode())})
            await send({"type": "http.response.body", "body": bytes(body)})

        await self.app(scope, receive, send_hashed)
