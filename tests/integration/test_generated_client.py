"""A client generated from the service's OpenAPI document works: openapi-python-client writes it
from a live server's ``/openapi.json`` (no network), and its own functions and models upload a
CSV and an ARFF file with its Mulan XML label file (as ``File`` objects), train, wait and predict,
reading the answers as typed attributes.

openapi-generator, the other common generator, needs Java and a jar download: not run here.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from app.api import examples
from tests.helpers import live_server

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
PACKAGE = "labelserve_generated"


def generator() -> str:
    """The openapi-python-client command of this environment (the test extra installs it)."""
    found = shutil.which("openapi-python-client", path=str(Path(sys.executable).parent))
    found = found or shutil.which("openapi-python-client")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("openapi-python-client is not installed; it is in the test extra")
        pytest.skip("openapi-python-client is not installed (pip install -e '.[test]')")
    return found


def generate(url: str, folder: Path) -> None:
    """The client generated from ``url``'s OpenAPI document, importable as ``PACKAGE`` (see ``part``)."""
    spec = folder / "openapi.json"
    spec.write_bytes(httpx.get(f"{url}/openapi.json").content)
    config = folder / "config.yml"
    config.write_text("post_hooks: []\n")  # no ruff run over the generated code
    command = [generator(), "generate", "--path", str(spec), "--output-path", str(folder / PACKAGE)]
    subprocess.run([*command, "--meta", "none", "--config", str(config)], check=True, capture_output=True)
    sys.path.insert(0, str(folder))
    try:
        importlib.import_module(PACKAGE)  # its modules are found from the package from now on
    finally:
        sys.path.remove(str(folder))


def part(name: str) -> ModuleType:
    """A module of the generated client (``client``, ``models``, ``api.prediction.predict``, ...)."""
    return importlib.import_module(f"{PACKAGE}.{name}")


def test_generated_client_uploads_trains_and_predicts(tmp_path: Path) -> None:
    (tmp_path / "server").mkdir()
    with live_server(tmp_path / "server") as url:
        generate(url, tmp_path)
        models, File = part("models"), part("types").File
        upload, train, predict = (
            part(f"api.{name}") for name in ("datasets.upload_dataset", "training.train", "prediction.predict")
        )
        with part("client").Client(base_url=url, raise_on_unexpected_status=True) as client:
            with (SAMPLES / "toy.csv").open("rb") as csv:
                body = models.BodyUploadDataset(file=File(payload=csv, file_name="toy.csv"), label_count=2)
                toy = upload.sync(client=client, body=body)
            assert isinstance(toy, models.DatasetOut) and toy.id == examples.TOY
            assert toy.label_names == ["happy", "calm"]

            with (SAMPLES / "shapes-train.arff").open("rb") as arff, (SAMPLES / "shapes.xml").open("rb") as xml:
                body = models.BodyUploadDataset(
                    file=File(payload=arff, file_name="shapes-train.arff"),
                    labels_file=File(payload=xml, file_name="shapes.xml"),
                )
                shapes = upload.sync(client=client, body=body)
            assert isinstance(shapes, models.DatasetOut) and shapes.id == examples.SHAPES_TRAIN
            assert shapes.label_names == ["round", "sharp", "large"] and shapes.n_samples == 60

            request = models.TrainRequest(
                method=models.TrainRequestMethod.MLKNN,
                dataset_id=shapes.id,
                model_name="generated-mlknn",
                params=models.TrainRequestParams.from_dict({"k": 5}),
            )
            job = train.sync(client=client, body=request, wait=True)
            assert isinstance(job, models.JobOut) and job.status == models.JobStatus.SUCCEEDED, job
            assert job.model.name == "generated-mlknn" and job.model.version == 1

            rows = [[0.8, 0.3, 0.7, 0.8, 0.6, 0.5], [0.2, 0.8, 0.6, 0.3, 0.6, 0.7]]
            request = models.PredictRequest(model="generated-mlknn", instances=rows, include_scores=True)
            answer = predict.sync(client=client, body=request)
            assert isinstance(answer, models.PredictResponse) and answer.model.version == 1
            for prediction in answer.predictions:
                assert isinstance(prediction, models.LabelSetPrediction)
                assert set(prediction.labels) <= {"round", "sharp", "large"}
                assert set(prediction.scores.additional_properties) == {"round", "sharp", "large"}
                assert all(isinstance(score, float) for score in prediction.scores.additional_properties.values())

            request = models.PredictRequest(
                model="generated-mlknn@1", instances=rows, output=models.PredictRequestOutputType0.RANKING, top_k=2
            )
            ranked = predict.sync(client=client, body=request)
            assert [len(item.ranking) for item in ranked.predictions] == [2, 2]
            assert all(isinstance(item.ranking[0], models.RankedLabel) for item in ranked.predictions)

            request = models.PredictRequest(
                model="generated-mlknn", instances=rows, output=models.PredictRequestOutputType0.SCORES
            )
            scores = predict.sync(client=client, body=request)
            assert scores.labels == ["round", "sharp", "large"] and len(scores.scores) == 2
            assert [len(row) for row in scores.scores] == [3, 3]
