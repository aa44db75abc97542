"""``GET /methods``: the catalog with each method's hyperparameter JSON schema."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import PageDep
from app.api.errors import responses
from app.schemas import MethodOut, Page
from app.services import methods

# every route here has a path or query parameter that can fail validation: the 422 in the API's own shape
router = APIRouter(prefix="/methods", tags=["methods"], responses=responses(422))


@router.get("", response_model=Page[MethodOut])
def list_methods(page: PageDep) -> Page[MethodOut]:
    return methods.list_methods(page)


@router.get("/{method_id}", response_model=MethodOut, responses=responses(404))
def get_method(method_id: str) -> MethodOut:
    return methods.show_method(method_id)
