"""``services.training.submit`` and the dataset service on a ``Core``, without HTTP."""

from __future__ import annotations

import numpy as np
import pytest

from app.errors import InvalidFields, InvalidInput, NotFound
from app.schemas import TrainRequest
from app.services import datasets, training
from app.services.datasets import Upload
from app.services.keys import Caller, Role
from app.storage.orm import Dataset, Job

CALLER = Caller("ci", Role.TRAIN, "127.0.0.1")


def _upload(core, name: str = "toy") -> str:
    rng = np.random.default_rng(0)
    X, Y = rng.random((30, 4)), (rng.random((30, 2)) > 0.5).astype(int)
    lines = ["f0,f1,f2,f3,a,b"] + [",".join([*map(str, x), *map(str, y)]) for x, y in zip(X, Y)]
    upload = Upload("\n".join(lines).encode(), f"{name}.csv", None, name, {"label_count": 2})
    with core.database.session() as session:
        out, new = datasets.upload(session, core.store, datasets.limits_of(core.settings), upload)
    assert new
    return out.id


def test_a_submit_queues_one_job_and_hands_it_to_the_runner(core):
    dataset_id = _upload(core)
    job = training.submit(
        core, TrainRequest(method="mlknn", dataset_id=dataset_id, model_name="m", params={"k": 3}), CALLER
    )
    assert job.status == "queued" and core.runner.submitted == [job.id]
    with core.database.reading() as session:
        stored = session.get(Job, job.id)
    assert stored is not None and stored.request["params"]["k"] == 3
    assert (stored.submitter, stored.submitted_from, job.submitted_by) == ("ci", "127.0.0.1", "ci")


def test_a_dataset_is_found_by_its_unique_name(core):
    dataset_id = _upload(core, "named")
    job = training.submit(core, TrainRequest(method="br", dataset_id="named", model_name="m"), CALLER)
    with core.database.reading() as session:
        assert session.get(Job, job.id).dataset_id == dataset_id


def test_refusals_name_the_field_and_queue_nothing(core):
    dataset_id = _upload(core)
    with pytest.raises(InvalidFields) as bad:
        training.submit(
            core, TrainRequest(method="mlknn", dataset_id=dataset_id, model_name="m", params={"k": "5"}), CALLER
        )
    assert bad.value.errors[0][0] == ("body", "params", "k")
    with pytest.raises(InvalidInput) as too_many:
        training.submit(
            core, TrainRequest(method="mlknn", dataset_id=dataset_id, model_name="m", params={"k": 30}), CALLER
        )
    assert too_many.value.loc == ("body", "params", "k")
    with pytest.raises(NotFound):
        training.submit(core, TrainRequest(method="br", dataset_id="nope", model_name="m"), CALLER)
    assert core.runner.submitted == []


def test_inline_data_are_stored_once_accepted(core):
    X = np.eye(6, 3).tolist()
    Y = [[1, 0], [0, 1]] * 3
    body = TrainRequest(method="br", model_name="inline", data={"X": X, "Y": Y})
    job = training.submit(core, body, CALLER)
    with core.database.reading() as session:
        stored = session.get(Dataset, session.get(Job, job.id).dataset_id)
    assert stored is not None and stored.n_samples == 6 and stored.format == "inline"
