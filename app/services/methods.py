"""The method catalog as the API shows it."""

from __future__ import annotations

from app.errors import NotFound
from app.methods.base import MethodSpec
from app.methods.catalog import catalog, get_method
from app.schemas import MethodOut, Page
from app.services.paging import PageParams, page_of
from app.suggest import did_you_mean


def method_out(spec: MethodSpec) -> MethodOut:
    return MethodOut(
        id=spec.id,
        task=spec.task,
        outputs=list(spec.outputs),
        dataset_kind=spec.dataset_kind,
        summary=spec.summary,
        paper=spec.paper,
        stages=list(spec.stages),
        params=spec.params.model_json_schema(),
    )


def list_methods(params: PageParams) -> Page[MethodOut]:
    return page_of([method_out(spec) for spec in catalog().values()], params)


def show_method(method_id: str) -> MethodOut:
    spec = get_method(method_id)
    if spec is None:
        raise NotFound(f"unknown method '{method_id}'{did_you_mean(method_id, catalog())}; see GET /methods")
    return method_out(spec)
