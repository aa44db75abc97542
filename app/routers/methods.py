"""``GET /methods``: the catalog with each method's hyperparameter JSON schema."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from app.deps import PageDep
from app.methods.base import MethodSpec
from app.methods.catalog import catalog, get_method
from app.schemas import MethodOut, Page

router = APIRouter(prefix="/methods", tags=["methods"])


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


@router.get("", response_model=Page[MethodOut])
def list_methods(page: PageDep) -> Page[MethodOut]:
    limit, offset = page
    specs = list(catalog().values())
    items = [method_out(spec) for spec in specs[offset : offset + limit]]
    return Page(items=items, next_offset=offset + limit if offset + limit < len(specs) else None)


@router.get("/{method_id}", response_model=MethodOut)
def get_method_route(method_id: str) -> MethodOut:
    spec = get_method(method_id)
    if spec is None:
        raise HTTPException(404, f"unknown method '{method_id}'; see GET /methods")
    return method_out(spec)
