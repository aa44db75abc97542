"""Which role each route needs: the one table, and the questions the gate and the pages ask it.

``ROUTE_ROLES`` names every guarded route of the app (the JSON API's and the dashboard's, by
method and path template); a route it leaves out needs ``admin``, and
``tests/api/test_roles.py`` fails when it leaves one out or names one that does not exist. The
request gate (``app.api.gate``) applies it before a route runs, from the path alone; the
dashboard's templates ask ``may`` to hide the forms a key's role may not send. Rules on what a
route does with the caller beyond its role (cancelling another key's job) are the services'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from app.services.keys import Caller, Key, Role

READ, PREDICT, TRAIN, ADMIN = Role.READ, Role.PREDICT, Role.TRAIN, Role.ADMIN

ROUTE_ROLES: dict[tuple[str, str], Role] = {
    # prediction and the V2 inference protocol
    ("POST", "/predict"): PREDICT,
    ("GET", "/v2/models/{name}"): READ,
    ("GET", "/v2/models/{name}/versions/{version}"): READ,
    ("GET", "/v2/models/{name}/ready"): READ,
    ("GET", "/v2/models/{name}/versions/{version}/ready"): READ,
    ("POST", "/v2/models/{name}/infer"): PREDICT,
    ("POST", "/v2/models/{name}/versions/{version}/infer"): PREDICT,
    ("GET", "/methods"): READ,
    ("GET", "/methods/{method_id}"): READ,
    # datasets
    ("POST", "/datasets"): TRAIN,
    ("GET", "/datasets"): READ,
    ("GET", "/datasets/{dataset_id}"): READ,
    ("POST", "/datasets/{dataset_id}/split"): TRAIN,
    ("DELETE", "/datasets/{dataset_id}"): ADMIN,
    # jobs (cancelling another key's job needs admin: services.jobs.cancel_job)
    ("POST", "/train"): TRAIN,
    ("GET", "/jobs"): READ,
    ("GET", "/jobs/{job_id}"): READ,
    ("DELETE", "/jobs/{job_id}"): PREDICT,
    ("GET", "/jobs/{job_id}/result"): READ,
    ("GET", "/jobs/{job_id}/report"): READ,
    # the registry
    ("GET", "/models"): READ,
    ("GET", "/models/{name}"): READ,
    ("GET", "/models/{name}/versions/{version}"): READ,
    ("GET", "/models/{name}/versions/{version}/report"): READ,
    ("GET", "/models/{name}/versions/{version}/artifact"): ADMIN,
    ("DELETE", "/models/{name}/versions/{version}"): ADMIN,
    ("DELETE", "/models/{name}"): ADMIN,
    ("PUT", "/models/{name}/aliases/{alias}"): TRAIN,
    ("DELETE", "/models/{name}/aliases/{alias}"): ADMIN,
    ("POST", "/evaluate"): TRAIN,
    ("POST", "/compare"): TRAIN,
    ("GET", "/audit"): ADMIN,
    # the dashboard: its pages read, its forms do what the API route they mirror does
    ("POST", "/ui/logout"): READ,
    ("GET", "/ui"): READ,
    ("GET", "/ui/datasets"): READ,
    ("POST", "/ui/datasets"): TRAIN,
    ("GET", "/ui/datasets/{dataset_id}"): READ,
    ("POST", "/ui/datasets/{dataset_id}/split"): TRAIN,
    ("POST", "/ui/datasets/{dataset_id}/delete"): ADMIN,
    ("GET", "/ui/models"): READ,
    ("GET", "/ui/models/{name}"): READ,
    ("GET", "/ui/models/{name}/versions/{number}"): READ,
    ("POST", "/ui/models/{name}/aliases"): TRAIN,
    ("POST", "/ui/models/{name}/aliases/{alias}/delete"): ADMIN,
    ("POST", "/ui/models/{name}/versions/{number}/delete"): ADMIN,
    ("POST", "/ui/models/{name}/delete"): ADMIN,
    ("GET", "/ui/models/{name}/versions/{number}/report"): READ,
    ("POST", "/ui/models/{name}/versions/{number}/evaluate"): TRAIN,
    ("GET", "/ui/models/{name}/versions/{number}/artifact"): ADMIN,
    ("GET", "/ui/versions"): READ,
    ("POST", "/ui/versions/evaluate"): TRAIN,
    ("GET", "/ui/jobs"): READ,
    ("GET", "/ui/jobs/progress"): READ,
    ("GET", "/ui/jobs/{job_id}"): READ,
    ("POST", "/ui/jobs/{job_id}/cancel"): PREDICT,
    ("GET", "/ui/jobs/{job_id}/report"): READ,
    ("GET", "/ui/assets/{name}"): READ,
    ("GET", "/ui/jobs/{job_id}/result"): READ,
    ("GET", "/ui/train"): READ,
    ("POST", "/ui/train"): TRAIN,
    ("GET", "/ui/compare"): READ,
    ("POST", "/ui/compare"): TRAIN,
    ("GET", "/ui/predict"): READ,
    ("POST", "/ui/predict"): PREDICT,
}

#: the request scope's entry where the gate leaves the key that authenticated the request
KEY_SCOPE = "labelserve.key"


class RouteRoles:
    """The role each request needs, found as the router finds its route: the first of ``routes``
    (the app's, in its order) whose method and path match (``ROUTE_ROLES``' role, else ``admin``).
    A request no route matches needs no more than a valid key: the router answers it 404 or 405."""

    def __init__(self, routes: Iterable[BaseRoute] = ()) -> None:
        self._by_method: dict[str, list[tuple[re.Pattern[str], Role]]] = {}
        for route in routes:
            if isinstance(route, Route):  # FastAPI's APIRoute included
                for method in route.methods or ():
                    role = ROUTE_ROLES.get((method, route.path), ADMIN)
                    self._by_method.setdefault(method, []).append((route.path_regex, role))

    def needed(self, method: str, path: str) -> Role:
        for pattern, role in self._by_method.get(method, ()):
            if pattern.match(path):
                return role
        return READ

    def refusal(self, key: Key, method: str, path: str) -> str | None:
        """The 403's message when ``key``'s role may not send ``method path``, else None."""
        if key.role is ADMIN:  # may do everything: no route to look up
            return None
        needed = self.needed(method, path)
        if key.role.allows(needed):
            return None
        return (
            f"this key (name '{key.name}', role '{key.role.value}') may not {method} {path}: "
            f"it needs the '{needed.value}' role"
        )


def caller_of(request: Request) -> Caller:
    """The caller the request gate admitted: its key's name and role; with no keys configured,
    an anonymous ``admin``. The client's address either way."""
    address = request.client.host if request.client is not None else None
    key: Key | None = request.scope.get(KEY_SCOPE)
    if key is not None:
        return Caller(key.name, key.role, address)
    if request.app.state.gate.keys is not None:  # a guarded route always has its key: never open by mistake
        raise RuntimeError(f"{request.method} {request.url.path} was not admitted by the request gate")
    return Caller(None, ADMIN, address)


def may(request: Request, method: str, template: str) -> bool:
    """Whether the request's key may send ``method`` to the route ``template`` (for the dashboard's
    templates, which hide the forms it may not send); False on a page seen without a key."""
    key: Key | None = request.scope.get(KEY_SCOPE)
    if key is None:
        return request.app.state.gate.keys is None
    return key.role.allows(ROUTE_ROLES.get((method, template), ADMIN))
