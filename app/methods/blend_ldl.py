"""Blend of label distribution learners (``blend-ldl``): the estimator lives in ``app.methods.blend``."""

from __future__ import annotations

from app.methods.base import MethodSpec
from app.methods.blend import BlendLDL, BlendLDLParams

SPEC = MethodSpec(
    id="blend-ldl",
    task="distribution",
    outputs=("distribution",),
    params=BlendLDLParams,
    estimator=BlendLDL,
    summary="Blend of label distribution learners (what auto registers when a mix beats every single "
    "candidate): the weighted mean of its members' distributions.",
    paper="Ensemble selection. Caruana R., Niculescu-Mizil A., Crew G., Ksikes A. Ensemble selection from "
    "libraries of models. ICML 2004. doi:10.1145/1015330.1015432",
    dataset_kind="distribution",
    stages=("members",),
)
