"""The dashboard's browser sessions: a signed, expiring cookie, and the CSRF tokens bound to it.

A session is a random id and, once its browser has signed in, the name of the key it signed in
with and an identifier bound to that key: an HMAC, under the server's secret, of the key's SHA-256
as the server keeps it (``app.services.keys``), never the key itself, so a session of a key that
has been revoked, or replaced under the same name, does not count. The cookie carries both, signed and
timestamped by itsdangerous (``URLSafeTimedSerializer``) with the server's secret
(``LABELSERVE_SECRET_KEY``, else the one kept in the store, ``app.storage.secret_key``): a
cookie the server did not sign, or signed more than ``LABELSERVE_SESSION_HOURS`` ago, is no
session. A form's CSRF token is an HMAC of its session's id (itsdangerous' ``Signer``), so only
the server can issue one, and it is good for that session alone.

``app.api.gate.RequestGate.session_key`` finds the session's key in the server's keys (its role
then applies as a header's would), on ``/ui`` paths only; ``app.ui.session`` issues sessions and
checks forms.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from functools import cached_property

from itsdangerous import BadData, Signer, URLSafeTimedSerializer

from app.config import Settings
from app.storage.secret_key import stored_secret

SESSION_COOKIE = "labelserve_session"


@dataclass(frozen=True)
class Session:
    id: str
    #: the identifier bound to the key its browser signed in with; empty before sign-in (or with no key)
    key: str
    #: the name of that key; empty before sign-in
    name: str = ""


class Sessions:
    """Issues and reads the session cookies and CSRF tokens of one server (its secret)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.max_age = int(settings.session_hours * 3600)

    @cached_property
    def _secret(self) -> bytes:
        """Read (or made) on first use; ``open`` does it at start-up."""
        given = self._settings.secret_key
        return given.encode() if given else stored_secret(self._settings.model_dir)

    @cached_property
    def _cookies(self) -> URLSafeTimedSerializer:
        return URLSafeTimedSerializer(
            self._secret, salt="labelserve.session", signer_kwargs={"digest_method": hashlib.sha256}
        )

    @cached_property
    def _tokens(self) -> Signer:
        return Signer(self._secret, salt="labelserve.csrf", digest_method=hashlib.sha256)

    def key_id(self, sha256: str) -> str:
        """The identifier binding a session to the key of SHA-256 ``sha256`` (hex)."""
        return hmac.new(self._secret, b"api-key:" + sha256.encode(), hashlib.sha256).hexdigest()[:32]

    def open(self) -> None:
        """Have the secret now (start-up), not at the first page."""
        _ = self._secret

    def new(self, name: str = "", sha256: str = "") -> tuple[Session, str]:
        """A new session (a new id: signing in never keeps the id of before) and its cookie value;
        signed in with the key ``name`` of SHA-256 ``sha256`` when both are given."""
        signed_in = bool(name and sha256)
        session = Session(
            secrets.token_urlsafe(18), self.key_id(sha256) if signed_in else "", name if signed_in else ""
        )
        return session, self._cookies.dumps([session.id, session.key, session.name])

    def read(self, cookie: str | None) -> Session | None:
        """The session of a cookie value the server signed within ``max_age``, else None."""
        if not cookie:
            return None
        try:
            sid, key, name = self._cookies.loads(cookie, max_age=self.max_age)
        except (BadData, ValueError, TypeError):
            return None
        fields = (sid, key, name)
        return Session(sid, key, name) if all(isinstance(f, str) for f in fields) else None

    def bound_to(self, session: Session | None, sha256: str) -> bool:
        """Whether ``session`` signed in with the key of SHA-256 ``sha256``."""
        return session is not None and bool(session.key) and hmac.compare_digest(session.key, self.key_id(sha256))

    def csrf_token(self, session: Session) -> str:
        return self._tokens.get_signature(session.id).decode()

    def csrf_ok(self, session: Session, token: str) -> bool:
        return self._tokens.verify_signature(session.id, token.encode())
