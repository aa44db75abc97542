"""Enforcing ``LABELSERVE_MAX_UPLOAD_MB`` while the request body streams in.

Starlette spools a whole multipart body before the route runs, so the limit has to sit in front
of it: the declared Content-Length is checked first, and the bytes actually received are counted
as they arrive, so a lying or chunked client is cut off at the limit too.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class UploadLimit:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT"):
            await self.app(scope, receive, send)
            return
        settings = scope["app"].state.settings
        limit = int(settings.max_upload_mb * 1024 * 1024)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._reject(send, settings.max_upload_mb)
            return
        received = 0
        rejected = False

        async def counting_receive() -> Message:
            # Past the limit, answer 413 at once and tell the app the client went away; the
            # app's own (error) response is then dropped by ``guarded_send``.
            nonlocal received, rejected
            if rejected:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    rejected = True
                    await self._reject(send, settings.max_upload_mb)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not rejected:
                await send(message)

        await self.app(scope, counting_receive, guarded_send)

    @staticmethod
    async def _reject(send: Send, limit_mb: float) -> None:
        body = json.dumps({"detail": f"request body larger than LABELSERVE_MAX_UPLOAD_MB ({limit_mb:g} MB)"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
