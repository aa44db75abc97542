"""Dashboard page times with a full registry: 200 models and 1,000 jobs (the issue's bar: every page
under 300 ms).

The registry is filled in one SQLite (or PostgreSQL) database: one real dataset (1,000 rows, 100
features, 200 labels) uploaded and one model trained through the API, so that its pages, its
report and the playground do real work, then 199 more models of 1 to 4 versions each (every
version with the dataset's 100 feature and 200 label names, an alias on most models) and 1,000
jobs of every status (50 still queued, so the queue positions are computed), written as rows.
A comparison (``br``, 2 folds) is run through the API too, for its report. Each page is then asked
for ``--repeat`` times in process through the ASGI app (no network), and the table gives the
median, p95 and largest time, and the page's size. A version report is built once per version and
dataset and then kept (``app.evaluation.report_cache``): its "first view" row empties that cache before each
request, so it times the evaluation and the charts; "again" times the kept page. The offline
download and plotly's asset (sent once, then cached by the browser for good) are files rather than
pages, timed for completeness. The machine's other load moves the numbers; run it on a quiet
machine for figures to compare.

The dataset is split (its test part: 200 rows) and every version is evaluated on the test part
once, so the metric columns, the metric history and the side-by-side comparison show numbers; the
forms of issue 38 (split, evaluate then the report) are timed as a browser posts them, following
the redirect, and the artifact export as the file it sends.

Run: ``.venv/bin/python -m benchmarks.ui_pages [--repeat 20] [--database sqlite|postgresql]``.
"""

from __future__ import annotations

import argparse
import io
import re
import statistics
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.storage.db import Database
from app.storage.orm import Alias, Evaluation, Job, Model, ModelVersion, VersionCounter
from app.storage.store import ARTIFACT_FORMAT

N_MODELS = 200
N_JOBS = 1000


def _dataset_csv(n: int = 1000, d: int = 100, q: int = 200, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = (X @ rng.normal(size=(d, q)) / np.sqrt(d) + 0.5 * rng.normal(size=(n, q)) > 1.0).astype(int)
    out = io.StringIO()
    out.write(",".join([f"f{j}" for j in range(d)] + [f"label{j}" for j in range(q)]) + "\n")
    for row, labels in zip(X, Y):
        out.write(",".join(f"{v:.4f}" for v in row) + "," + ",".join(str(v) for v in labels) + "\n")
    return out.getvalue().encode()


def fill(client: TestClient, database_url: str) -> dict[str, str]:
    """The registry described above; returns the names and ids the pages are asked about."""
    r = client.post(
        "/datasets",
        files={"file": ("bench.csv", _dataset_csv(), "text/csv")},
        data={"label_count": "200", "name": "bench"},
    )
    assert r.status_code in (200, 201), r.text
    dataset = r.json()
    r = client.post("/train?wait=true", json={"method": "br", "dataset_id": dataset["id"], "model_name": "m000"})
    assert r.json()["status"] == "succeeded", r.text
    compare_id = client.post("/compare", json={"dataset_id": dataset["id"], "methods": ["br"], "cv": 2}).json()["id"]
    while (job := client.get(f"/jobs/{compare_id}", params={"wait": 30}).json())["status"] in ("queued", "running"):
        continue
    assert job["status"] == "succeeded", job
    test = client.post(f"/datasets/{dataset['id']}/split", json={"test_fraction": 0.2}).json()["test"]
    evaluated = client.post("/evaluate", json={"model": "m000@1", "dataset_id": test["id"]}).json()
    real = client.get("/models/m000/versions/1").json()
    now = datetime.now(timezone.utc)
    with Database(database_url).session() as session:
        fake_versions = []
        for i in range(1, N_MODELS):
            name = f"m{i:03d}"
            session.add(Model(name=name))
            versions = 1 + i % 4
            for v in range(1, versions + 1):
                fake_versions.append(
                    ModelVersion(
                        model_name=name,
                        version=v,
                        method=real["method"],
                        params=real["params"],
                        dataset_id=dataset["id"],
                        dataset_sha256=dataset["sha256"],
                        feature_names=real["feature_names"],
                        label_names=real["label_names"],
                        training_seconds=1.0,
                        warnings=[],
                        library_versions=real["library_versions"],
                        artifact_sha256=real["artifact_sha256"],
                        artifact_format=ARTIFACT_FORMAT,
                        job_id=None,
                        created_at=now - timedelta(minutes=i),
                    )
                )
                session.add(fake_versions[-1])
            session.add(VersionCounter(model_name=name, last_version=versions))
            if i % 3:
                session.add(Alias(model_name=name, alias="prod", version=versions))
        session.flush()
        for row in fake_versions:  # each version evaluated once on the test part (the metric columns)
            session.add(
                Evaluation(
                    version_id=row.id,
                    dataset_id=test["id"],
                    dataset_sha256=test["sha256"],
                    n_samples=test["n_samples"],
                    metrics=evaluated["metrics"],
                    options={"threshold": None, "downstream": None},
                )
            )
        statuses = ["succeeded"] * 850 + ["failed"] * 60 + ["cancelled"] * 38 + ["queued"] * 50 + ["running"] * 2
        queued_id = ""
        for i, status in enumerate(statuses):
            job_id = uuid.uuid4().hex
            queued_id = job_id if status == "queued" else queued_id
            session.add(
                Job(
                    id=job_id,
                    kind="train",
                    status=status,
                    progress=1.0 if status == "succeeded" else 0.4,
                    stage="done" if status == "succeeded" else "fitting",
                    method="br",
                    dataset_id=dataset["id"],
                    model_name=f"m{i % N_MODELS:03d}",
                    model_version=1 if status == "succeeded" else None,
                    request={},
                    created_at=now - timedelta(seconds=N_JOBS - i),
                )
            )
        session.commit()
    rows = "\n".join(["0.1," * 99 + "0.1"] * 5)
    return {"dataset": dataset["id"], "test": test["id"], "queued": queued_id, "rows": rows, "compare": compare_id}


def pages(ids: dict[str, str], jobs_page: list[str], asset: str) -> list[tuple[str, str, dict[str, str] | None, bool]]:
    """(label, path, form, cold) of every page; a form makes it a POST, ``cold`` empties the
    report cache before each request."""
    ds = ids["dataset"]
    report = f"/ui/models/m000/versions/1/report?dataset_id={ds}"
    versions = "&".join(f"v=m003@{n}" for n in range(1, 5))
    return [
        ("overview", "/ui", None, False),
        ("datasets", "/ui/datasets", None, False),
        ("dataset (200 labels, split)", f"/ui/datasets/{ds}", None, False),
        ("models, first page", "/ui/models", None, False),
        ("models, last page", "/ui/models?offset=175", None, False),
        ("model (4 versions, metric history)", "/ui/models/m003", None, False),
        ("version (evaluation picker)", "/ui/models/m000/versions/1", None, False),
        ("jobs, first page", "/ui/jobs", None, False),
        ("jobs, last page", "/ui/jobs?offset=975", None, False),
        ("jobs, queued (positions)", "/ui/jobs?status=queued", None, False),
        ("job (queued)", f"/ui/jobs/{ids['queued']}", None, False),
        ("progress poll (25 jobs)", "/ui/jobs/progress?ids=" + ",".join(jobs_page), None, False),
        ("models, search 'm1' (111 found)", "/ui/models?q=m1", None, False),
        ("models, method and alias filter", "/ui/models?method=br&alias=prod", None, False),
        ("datasets, name and kind filter", "/ui/datasets?q=bench&kind=multilabel", None, False),
        (
            "versions side by side (4, on the test part)",
            f"/ui/versions?{versions}&dataset_id={ids['test']}",
            None,
            False,
        ),
        ("split (POST; the parts stored before)", f"/ui/datasets/{ds}/split", {"test_fraction": "0.2"}, False),
        (
            "evaluate on the test part (POST, then the report)",
            "/ui/models/m000/versions/1/evaluate",
            {"dataset_id": ids["test"]},
            False,
        ),
        ("export the artifact (zip file)", "/ui/models/m000/versions/1/artifact", None, False),
        ("train (auto)", "/ui/train", None, False),
        ("train (br)", "/ui/train?method=br", None, False),
        ("compare", "/ui/compare", None, False),
        ("predict", "/ui/predict", None, False),
        ("predict 5 rows (POST)", "/ui/predict", {"model": "m000", "rows": ids["rows"], "output": "ranking"}, False),
        ("compare report", f"/ui/jobs/{ids['compare']}/report", None, False),
        ("version report, first view (evaluates 1,000 x 200)", report, None, True),
        ("version report, again", report, None, False),
        ("version report, offline download (file)", report + "&download=1", None, False),
        ("plotly asset, gzip (file; then cached)", asset, None, False),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--postgres-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.database == "postgresql":
            from app.storage.db import migrate
            from tests.helpers import throwaway_postgres

            context = throwaway_postgres(args.postgres_url)
            url = context.__enter__()
            migrate(url)
        else:
            url = f"sqlite:///{Path(tmp) / 'registry.db'}"
        settings = Settings(
            database_url=url, model_dir=Path(tmp) / "store", max_upload_mb=64, allowed_hosts="testserver"
        )
        # the forms are posted as a browser posts them: from a page of the service's origin
        with TestClient(create_app(settings), headers={"Origin": "http://testserver"}) as client:
            ids = fill(client, url)
            listed = client.get("/jobs", params={"limit": 25}).json()["items"]
            token = re.search(r'name="csrf" value="([^"]+)"', client.get("/ui/predict").text)
            assert token is not None
            print(f"registry: {N_MODELS} models, {N_JOBS + 1} jobs, database {args.database}\n")
            print("| page | median ms | p95 ms | max ms | KiB sent |")
            print("|---|---:|---:|---:|---:|")
            report = client.get(f"/ui/models/m000/versions/1/report?dataset_id={ids['dataset']}").text
            asset = re.search(r'src="(/ui/assets/[^"]+)"', report)
            assert asset is not None
            for label, path, form, cold in pages(ids, [j["id"] for j in listed], asset.group(1)):
                times, size = [], 0
                for _ in range(args.repeat):
                    if cold:
                        client.app.state.core.pages.clear()  # type: ignore[attr-defined]
                    start = time.perf_counter()
                    if form is None:
                        r = client.get(path, headers={"Accept-Encoding": "gzip"})
                    else:
                        r = client.post(path, data={**form, "csrf": token.group(1)})
                    times.append(1000 * (time.perf_counter() - start))
                    assert r.status_code == 200, (path, r.status_code, r.text[:300])
                    size = int(r.headers.get("content-length", len(r.content)))  # as sent
                times.sort()
                p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
                print(f"| {label} | {statistics.median(times):.1f} | {p95:.1f} | {times[-1]:.1f} | {size / 1024:.0f} |")
        if args.database == "postgresql":
            context.__exit__(None, None, None)


if __name__ == "__main__":
    main()
