"""The client side of the ``labelserve`` command and ``app.client.Client``, against a real server.

One ``labelserve serve`` process (uvicorn, SQLite, local job pool) serves the whole module; the
commands run in-process through Typer's runner, so their output and exit codes are checked as a
script would see them.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from app import __version__
from app.client import ApiError, Client
from app.client.cli import base as cli_base
from app.client.cli import cli
from app.client.cli import jobs as cli_jobs
from tests.helpers import assert_self_contained, csv_bytes, live_server, make_distribution, make_multilabel

# real `labelserve` processes: left out of the quick subset
pytestmark = pytest.mark.slow

runner = CliRunner()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_server(tmp_path_factory.mktemp("cli")) as url:
        yield url


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("cli-files")
    X, Y = make_multilabel(n=40)
    Xd, D = make_distribution(n=40)
    paths = {"ml": folder / "ml.csv", "ldl": folder / "ldl.csv", "rows": folder / "rows.json"}
    paths["ml"].write_bytes(csv_bytes(X, Y))
    paths["ldl"].write_bytes(csv_bytes(Xd, D))
    paths["rows"].write_text(json.dumps(X[:3].tolist()))
    paths["objects"] = folder / "rows.csv"
    paths["objects"].write_text("f5,f4,f3,f2,f1,f0\n" + "\n".join(",".join(map(str, row[::-1])) for row in X[:2]))
    return paths


def run(server: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, ["--url", server, *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def run_json(server: str, *args: str) -> object:
    code, stdout, stderr = run(server, *args, "--json")
    assert code == 0, stderr
    return json.loads(stdout)


@pytest.fixture(scope="module")
def datasets(server: str, files: dict[str, Path]) -> dict[str, dict]:
    ml = run_json(server, "datasets", "upload", str(files["ml"]), "--label-count", "3", "--name", "ml")
    ldl = run_json(server, "datasets", "upload", str(files["ldl"]), "--label-count", "4")
    return {"ml": ml, "ldl": ldl}  # type: ignore[dict-item]


def test_datasets_delete_force_with_dependent_versions(server: str, files: dict[str, Path]) -> None:
    scratch = run_json(server, "datasets", "upload", str(files["ml"]), "--label-count", "1")
    run_json(server, "train", "mlknn", scratch["id"], "--name", "cli-lineage", "-p", "k=3", "--follow")  # type: ignore[index]
    code, _, stderr = run(server, "datasets", "delete", scratch["id"])  # type: ignore[index]
    assert code == 3 and "409" in stderr and "cli-lineage@1" in stderr and "force" in stderr
    assert run(server, "datasets", "delete", scratch["id"], "--force")[0] == 0  # type: ignore[index]
    assert run(server, "datasets", "show", scratch["id"])[0] == 4  # type: ignore[index]
    version = run_json(server, "models", "show", "cli-lineage", "--version", "1")
    assert version["dataset_id"] == scratch["id"]  # type: ignore[index]


@pytest.fixture(scope="module")
def trained(server: str, datasets: dict[str, dict]) -> dict[str, dict]:
    """Three models, one per output family, trained with --follow --json."""
    jobs = {}
    for method, kind, name, params in [
        ("mlknn", "ml", "cli-mlknn", ["-p", "k=5"]),
        ("ldlkm", "ldl", "cli-ldl", ["-p", "k=3", "--random-state", "0"]),
        ("ghc-dr", "ml", "cli-ghc", []),
    ]:
        jobs[name] = run_json(server, "train", method, datasets[kind]["id"], "--name", name, *params, "--follow")
    return jobs  # type: ignore[return-value]


COMMANDS = [
    [],
    ["serve"],
    ["worker"],
    ["migrate"],
    ["keys"],
    ["keys", "add"],
    ["keys", "remove"],
    ["datasets"],
    ["datasets", "upload"],
    ["datasets", "list"],
    ["datasets", "show"],
    ["datasets", "delete"],
    ["datasets", "split"],
    ["train"],
    ["jobs"],
    ["jobs", "list"],
    ["jobs", "show"],
    ["jobs", "cancel"],
    ["predict"],
    ["evaluate"],
    ["models"],
    ["models", "list"],
    ["models", "show"],
    ["models", "alias"],
    ["models", "export"],
    ["audit"],
    ["methods"],
    ["methods", "list"],
    ["methods", "show"],
    ["compare"],
]


def test_every_command_is_listed_here() -> None:
    """COMMANDS (each with a --help test below) covers every command the CLI has."""
    import typer.main

    def walk(group: object, prefix: list[str]) -> Iterator[list[str]]:
        yield prefix
        for name, command in getattr(group, "commands", {}).items():
            yield from walk(command, [*prefix, name])

    assert sorted(walk(typer.main.get_command(cli), [])) == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "labelserve")
def test_help(command: list[str]) -> None:
    result = runner.invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.stdout and "--help" in result.stdout


def test_version() -> None:
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"labelserve {__version__}"


def test_datasets_upload_list_show_delete(server: str, files: dict[str, Path], datasets: dict[str, dict]) -> None:
    ml = datasets["ml"]
    assert ml["kind"] == "multilabel" and ml["n_labels"] == 3 and ml["name"] == "ml"
    assert datasets["ldl"]["kind"] == "distribution"
    code, stdout, stderr = run(server, "datasets", "upload", str(files["ml"]), "--label-count", "3")
    assert code == 0 and ml["id"] in stdout and "multilabel" in stdout  # same content: the stored one
    assert stderr.splitlines()[0] == f"already stored: the same upload is dataset {ml['id']} (ml)"
    code, stdout, _ = run(server, "datasets", "list")
    assert code == 0 and ml["id"] in stdout and datasets["ldl"]["id"] in stdout
    assert {d["id"] for d in run_json(server, "datasets", "list", "--limit", "1")["items"]} <= {  # type: ignore[index]
        ml["id"],
        datasets["ldl"]["id"],
    }
    code, stdout, _ = run(server, "datasets", "show", ml["id"])
    assert code == 0 and "label_names" in stdout and "label0" in stdout
    code, stdout, stderr = run(server, "datasets", "upload", str(files["ml"]), "--label-count", "2", "--json")
    scratch = json.loads(stdout)
    assert code == 0 and "already stored" not in stderr
    assert run(server, "datasets", "delete", scratch["id"])[0] == 0
    code, _, stderr = run(server, "datasets", "show", scratch["id"])  # type: ignore[index]
    assert code == 4 and "not found" in stderr


def test_train_follow_shows_progress_and_registers(server: str, datasets: dict[str, dict]) -> None:
    code, stdout, stderr = run(server, "train", "mlknn", datasets["ml"]["id"], "--name", "cli-bar", "--follow")
    assert code == 0, stderr
    assert "100%" in stderr and "train succeeded: done" in stderr  # the bar's last state
    assert "cli-bar@1" in stdout


def test_train_without_follow_queues(server: str, datasets: dict[str, dict]) -> None:
    accepted = run_json(server, "train", "mlknn", datasets["ml"]["id"], "--name", "cli-queued", "-p", "k=3")
    assert accepted["status"] == "queued"  # type: ignore[index]
    job = run_json(server, "jobs", "show", accepted["job_id"], "--follow")  # type: ignore[index]
    assert job["status"] == "succeeded" and job["model"] == {"name": "cli-queued", "version": 1}  # type: ignore[index]


def test_failed_job_exits_non_zero(server: str, tmp_path: Path) -> None:
    # fewer distinct rows than clusters: the request is valid, only the fit can tell
    X = np.repeat(np.random.default_rng(0).random((3, 4)), 10, axis=0)
    dupes = tmp_path / "dupes.csv"
    dupes.write_bytes(csv_bytes(X, np.full((30, 2), 0.5)))
    dataset = run_json(server, "datasets", "upload", str(dupes), "--label-count", "2", "--name", "dupes")
    code, _, stderr = run(server, "train", "ldlkm", dataset["id"], "--name", "cli-fail", "-p", "k=5", "-f")  # type: ignore[index]
    assert code == 1, stderr
    assert "failed" in stderr


def test_rejected_request_exit_codes(server: str, datasets: dict[str, dict]) -> None:
    code, _, stderr = run(server, "train", "mlknn", datasets["ml"]["id"], "--name", "x", "-p", "nope=1")
    assert code == 3 and "nope" in stderr
    code, _, stderr = run(server, "train", "ldlkm", datasets["ml"]["id"], "--name", "x")
    assert code == 3 and "distribution" in stderr
    assert run(server, "train", "mlknn", datasets["ml"]["id"], "--name", "x", "-p", "novalue")[0] == 2
    assert run(server, "jobs", "show", "no-such-job")[0] == 4
    code, _, stderr = run("http://127.0.0.1:9", "datasets", "list")
    assert code == 6 and "cannot reach" in stderr


def test_jobs_list_show_cancel(server: str, trained: dict[str, dict]) -> None:
    job = trained["cli-mlknn"]
    assert job["status"] == "succeeded"
    code, stdout, _ = run(server, "jobs", "list", "--status", "succeeded")
    assert code == 0 and job["id"] in stdout
    code, stdout, _ = run(server, "jobs", "show", job["id"])
    assert code == 0 and "cli-mlknn@1" in stdout
    code, _, stderr = run(server, "jobs", "cancel", job["id"])
    assert code == 3 and "already ended" in stderr


def test_jobs_cancel_a_running_job(server: str, tmp_path: Path) -> None:
    X, Y = make_multilabel(n=1500, d=40)  # ELCFS takes seconds on this: time to cancel it
    (tmp_path / "big.csv").write_bytes(csv_bytes(X, Y))
    big = run_json(server, "datasets", "upload", str(tmp_path / "big.csv"), "--label-count", "3")
    accepted = run_json(server, "train", "elcfs", big["id"], "--name", "cli-cancelled")  # type: ignore[index]
    cancelled = run_json(server, "jobs", "cancel", accepted["job_id"])  # type: ignore[index]
    assert cancelled["status"] == "cancelled"  # type: ignore[index]
    code, _, stderr = run(server, "jobs", "show", accepted["job_id"], "--follow")  # type: ignore[index]
    assert code == 1 and "cancelled" in stderr


def test_predict_every_output_kind(server: str, files: dict[str, Path], trained: dict[str, dict]) -> None:
    labels = run_json(server, "predict", "cli-mlknn", "--input", str(files["rows"]), "--include-scores")
    assert labels["output"] == "labels" and len(labels["predictions"]) == 3  # type: ignore[index]
    assert "scores" in labels["predictions"][0]  # type: ignore[index]
    code, stdout, _ = run(
        server, "predict", "cli-mlknn", "-i", str(files["rows"]), "--output", "ranking", "--top-k", "2"
    )
    assert code == 0 and "ranking (best first)" in stdout and "label" in stdout
    # CSV columns in another order than training: sent as {feature: value} objects
    by_name = run_json(server, "predict", "cli-mlknn@1", "-i", str(files["objects"]), "--output", "ranking")
    by_position = run_json(server, "predict", "cli-mlknn", "-i", str(files["rows"]), "--output", "ranking")
    assert by_name["predictions"] == by_position["predictions"][:2]  # type: ignore[index]
    X, _ = make_distribution(n=40)
    rows = files["rows"].parent / "ldl-rows.json"
    rows.write_text(json.dumps({"instances": X[:2].tolist()}))
    code, stdout, _ = run(server, "predict", "cli-ldl", "-i", str(rows))
    assert code == 0 and "label3" in stdout
    code, stdout, _ = run(server, "predict", "cli-ghc", "--top-k", "2")
    assert code == 0 and "feature" in stdout and len(run_json(server, "predict", "cli-ghc")["features"]) == 6  # type: ignore[index]
    code, _, stderr = run(server, "predict", "cli-mlknn", "-i", str(rows))
    assert code == 3 and "6" in stderr  # wrong feature count, named by the server


def test_evaluate(server: str, datasets: dict[str, dict], trained: dict[str, dict]) -> None:
    result = run_json(server, "evaluate", "cli-mlknn", datasets["ml"]["id"])
    assert 0 <= result["metrics"]["hamming_loss"] <= 1  # type: ignore[index]
    code, stdout, _ = run(server, "evaluate", "cli-ldl", datasets["ldl"]["id"])
    assert code == 0 and "chebyshev" in stdout


def test_models_list_show_alias(server: str, trained: dict[str, dict]) -> None:
    code, stdout, _ = run(server, "models", "list")
    assert code == 0 and "cli-mlknn" in stdout and "ghc-dr" in stdout
    code, stdout, _ = run(server, "models", "show", "cli-mlknn")
    assert code == 0 and "mlknn" in stdout
    version = run_json(server, "models", "show", "cli-mlknn", "--version", "1")
    assert version["params"]["k"] == 5  # type: ignore[index]
    code, stdout, _ = run(server, "models", "alias", "cli-mlknn", "prod", "1")
    assert code == 0 and "cli-mlknn@prod -> version 1" in stdout
    X, _ = make_multilabel(n=40)
    stdin = json.dumps(X[:1].tolist())
    result = runner.invoke(cli, ["--url", server, "predict", "cli-mlknn@prod", "-i", "-", "--json"], input=stdin)
    assert result.exit_code == 0 and json.loads(result.stdout)["model"]["version"] == 1
    assert run(server, "models", "alias", "cli-mlknn", "prod", "--delete")[0] == 0
    assert run(server, "models", "alias", "cli-mlknn", "prod", "--delete")[0] == 4
    assert run(server, "models", "alias", "cli-mlknn", "prod")[0] == 2
    # the audit names both moves, newest first (no keys here: no key name)
    events = run_json(server, "audit", "--target", "cli-mlknn@prod")["items"]  # type: ignore[index]
    assert [(e["action"], e["key_name"]) for e in events] == [("alias.delete", None), ("alias.set", None)]
    code, stdout, _ = run(server, "audit", "--action", "alias.set")
    assert code == 0 and "cli-mlknn@prod" in stdout and "alias.delete" not in stdout


def test_methods_list_show(server: str) -> None:
    code, stdout, _ = run(server, "methods", "list")
    assert code == 0 and "ldlkm" in stdout and "distribution" in stdout
    code, stdout, _ = run(server, "methods", "show", "ldlkm")
    assert code == 0 and "max_iter" in stdout
    assert run(server, "methods", "show", "nope")[0] == 4


def test_api_key_is_sent_and_auth_errors_exit_5(tmp_path: Path) -> None:
    with live_server(tmp_path, env={"LABELSERVE_API_KEY": "k3y"}) as url:
        assert runner.invoke(cli, ["--url", url, "datasets", "list"]).exit_code == 5
        assert runner.invoke(cli, ["--url", url, "--api-key", "bad", "datasets", "list"]).exit_code == 5
        result = runner.invoke(cli, ["--url", url, "datasets", "list"], env={"LABELSERVE_API_KEY": "k3y"})
        assert result.exit_code == 0, result.output
        with Client(url, "k3y") as client:
            assert client.datasets()["items"] == []
        with Client(url) as client, pytest.raises(ApiError) as error:
            client.datasets()
        assert error.value.status_code == 401 and "missing API key" in str(error.value)


def contract_server() -> httpx.MockTransport:
    """``POST /compare`` and its job as the HTTP contract describes them (one running poll, then done)."""
    polls = {"n": 0}
    leaderboard = [
        {
            "method": "mlknn",
            "params": {"k": 10},
            "metrics": {"average_precision": {"mean": 0.81, "std": 0.02}},
            "fit_seconds": 0.1,
        },
        {
            "method": "dmknn",
            "params": {"k": 10},
            "metrics": {"average_precision": {"mean": 0.79, "std": 0.03}},
            "fit_seconds": 0.3,
        },
    ]

    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "POST" and path == "/compare":
            assert json.loads(request.content) == {"dataset_id": "d1", "methods": ["mlknn", "dmknn"], "cv": 3}
            return httpx.Response(202, json={"job_id": "c1", "status": "queued", "status_url": "/jobs/c1"})
        if path == "/jobs/c1":
            polls["n"] += 1
            done = polls["n"] > 1
            return httpx.Response(
                200,
                json={
                    "id": "c1",
                    "kind": "compare",
                    "status": "succeeded" if done else "running",
                    "progress": 1.0 if done else 0.5,
                    "stage": "done" if done else "fold 2/3",
                    "model": None,
                    "error": None,
                },
            )
        if path == "/jobs/c1/result":
            return httpx.Response(200, json={"metric": "average_precision", "cv": 3, "leaderboard": leaderboard})
        if path == "/jobs/c1/report":
            return httpx.Response(200, text="<html>report</html>", headers={"content-type": "text/html"})
        return httpx.Response(404, json={"detail": "not found"})

    return httpx.MockTransport(handle)


def test_compare_follows_the_job_and_saves_the_report(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    transport = contract_server()
    monkeypatch.setattr(
        cli_base, "make_client", lambda url, key: Client(http=httpx.Client(base_url=url, transport=transport))
    )
    monkeypatch.setattr("app.client.http.time.sleep", lambda seconds: None)
    report = tmp_path / "report.html"
    result = runner.invoke(cli, ["compare", "d1", "-m", "mlknn", "-m", "dmknn", "--cv", "3", "--report", str(report)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if "knn" in line]
    assert "mlknn" in lines[0] and "0.81" in lines[0] and "dmknn" in lines[1]
    assert report.read_text() == "<html>report</html>"


def test_compare_against_the_real_server(server: str, datasets: dict[str, dict], tmp_path: Path) -> None:
    """The whole path the mock above stands in for: the job runs in the server's pool, the table is
    the job's leaderboard, and the saved report is the server's self-contained page."""
    report = tmp_path / "compare.html"
    ml = datasets["ml"]["id"]
    code, stdout, stderr = run(server, "compare", ml, "-m", "br", "-m", "mlknn", "--cv", "3", "--report", str(report))
    assert code == 0, stderr
    assert "by 3-fold cross-validation" in stdout and "report written" in stderr
    ranked = [line for line in stdout.splitlines() if " br " in line or " mlknn " in line]
    assert len(ranked) == 2
    html = report.read_text()
    assert assert_self_contained(html) >= 1  # opens with no network: charts and their script inlined
    result = run_json(server, "compare", ml, "-m", "br", "-m", "mlknn", "--cv", "3", "--metric", "hamming_loss")
    assert result["metric"] == "hamming_loss" and result["cv"] == 3  # type: ignore[index]
    losses = [e["metrics"]["hamming_loss"]["mean"] for e in result["leaderboard"]]  # type: ignore[index]
    assert len(losses) == 2 and losses == sorted(losses)  # a loss ranks lowest first
    assert run(server, "compare", ml, "-m", "ldlkm")[0] != 0  # an LDL method on a multi-label set is refused


def test_models_show_takes_a_reference(server: str, trained: dict[str, dict]) -> None:
    """``models show`` names a model as predict does: name@version and name@alias show that version."""
    by_version = run_json(server, "models", "show", "cli-mlknn@1")
    assert by_version["version"] == 1 and by_version["params"]["k"] == 5  # type: ignore[index]
    assert run(server, "models", "alias", "cli-mlknn", "staging", "1")[0] == 0
    assert run_json(server, "models", "show", "cli-mlknn@staging") == by_version
    code, stdout, _ = run(server, "models", "show", "cli-mlknn@staging")
    assert code == 0 and "cli-mlknn@1" in stdout and "label_names" in stdout
    # for people: one key=value line per parameter, as given; measurements to 3 significant digits
    lines = [line.split() for line in stdout.splitlines()]
    params: dict = by_version["params"]  # type: ignore[index,assignment]
    at = lines.index(["params", "k=5"])
    shown = [lines[at][1], *(line[0] for line in lines[at + 1 : at + len(params)])]
    assert dict(item.split("=", 1) for item in shown) == {
        key: value if isinstance(value, str) else json.dumps(value) for key, value in params.items()
    }
    [seconds] = [line[1] for line in lines if line[:1] == ["training_seconds"]]
    full = by_version["training_seconds"]  # type: ignore[index]
    assert float(seconds) == float(f"{full:.3g}") and seconds != str(full)
    code, _, stderr = run(server, "models", "show", "cli-mlknn@nope")
    assert code == 4 and "no alias 'nope'" in stderr and "staging" in stderr
    assert run(server, "models", "show", "cli-mlknn@1", "--version", "1")[0] == 2
    assert run(server, "models", "alias", "cli-mlknn", "staging", "--delete")[0] == 0
    with Client(server) as client:
        assert client.model_version("cli-mlknn") == client.model_version("cli-mlknn@1") == by_version


def test_param_comma_lists(server: str, datasets: dict[str, dict]) -> None:
    """``-p candidates=br,mlknn`` is a list (it failed as "Input should be a valid list")."""
    assert cli_jobs.parse_param("candidates=br,mlknn") == ("candidates", ["br", "mlknn"])
    assert cli_jobs.parse_param("k=3,5") == ("k", [3, 5])
    assert cli_jobs.parse_param('candidates=["br"]') == ("candidates", ["br"])
    assert cli_jobs.parse_param('name="a,b"') == ("name", "a,b")
    assert cli_jobs.parse_param("metric=hamming_loss") == ("metric", "hamming_loss")
    job = run_json(
        server, "train", "auto", datasets["ml"]["id"], "-n", "cli-auto", "-p", "candidates=br,mlknn", "-p", "cv=2", "-f"
    )
    assert job["status"] == "succeeded", job  # type: ignore[index]
    version = run_json(server, "models", "show", "cli-auto@1")
    assert version["method"] in ("br", "mlknn") or version["method"].startswith("blend")  # type: ignore[index]
    result = runner.invoke(cli, ["train", "--help"])
    assert "comma list" in result.stdout and "JSON" in result.stdout


def test_tables_in_a_pipe_are_plain_columns(server: str, datasets: dict[str, dict], trained: dict[str, dict]) -> None:
    """stdout is not a terminal here (as in ``| cat`` or a CI log): one line per row, no box, no folding."""
    code, stdout, _ = run(server, "datasets", "list")
    assert code == 0
    lines = stdout.splitlines()
    assert lines[1].split() == ["id", "name", "kind", "samples", "features", "labels", "created"]
    for dataset in datasets.values():
        [line] = [line for line in lines if line.startswith(dataset["id"])]
        assert line.split()[:6] == [
            dataset["id"],
            dataset["name"],
            dataset["kind"],
            "40",
            str(dataset["n_features"]),
            str(dataset["n_labels"]),
        ]
    assert not set("│┃┏━─") & set(stdout)
    assert max(map(len, lines)) <= 80  # short names: the whole listing fits 80 columns
    code, stdout, _ = run(server, "--wide", "models", "list")
    assert code == 0 and any(line.startswith("cli-mlknn ") for line in stdout.splitlines())


def test_compare_help_matches_its_options() -> None:
    text = runner.invoke(cli, ["compare", "--help"]).stdout
    assert "--timeout" in text and "--follow" not in text and "With --follow" not in text


def test_client_takes_arrays_sparse_matrices_and_frames(server: str, trained: dict[str, dict]) -> None:
    """NumPy arrays and SciPy sparse matrices in, for uploads, inline training and predictions; NumPy out."""
    import scipy.sparse as sp

    X, Y = make_multilabel(n=40)
    with Client(server) as client:
        dataset = client.upload_arrays(X, Y, name="from-arrays")
        assert (dataset["n_samples"], dataset["n_features"], dataset["n_labels"]) == (40, 6, 3)
        assert dataset["label_names"] == ["l0", "l1", "l2"] and dataset["feature_names"][0] == "f0"
        assert client.upload_arrays(sp.csr_matrix(X), sp.csr_matrix(Y), name="from-arrays")["id"] == dataset["id"]
        stored = client.dataset(dataset["id"])
        assert stored["sha256"] == dataset["sha256"]  # the sparse upload is the same CSV, byte for byte
        listed = client.predict("cli-mlknn", X[:5].tolist(), output="ranking")
        assert client.predict("cli-mlknn", X[:5], output="ranking")["predictions"] == listed["predictions"]
        assert (
            client.predict("cli-mlknn", sp.csr_matrix(X[:5]), output="ranking")["predictions"] == listed["predictions"]
        )
        with pytest.raises(ValueError, match="2-D"):
            client.predict("cli-mlknn", X[0])
        labels = client.predict_array("cli-mlknn", X[:5])
        names = client.model_version("cli-mlknn")["label_names"]
        expected = client.predict("cli-mlknn", X[:5])["predictions"]
        assert labels.dtype == np.int8 and labels.shape == (5, 3)
        assert [[names[j] for j in np.flatnonzero(row)] for row in labels] == [
            sorted(p["labels"], key=names.index) for p in expected
        ]
        ranking = client.predict_array("cli-mlknn", X[:5], output="ranking", top_k=2)
        assert ranking.shape == (5, 3) and (np.isnan(ranking).sum(axis=1) == 1).all()
        Xd, _ = make_distribution(n=40)
        distribution = client.predict_array("cli-ldl", Xd[:4])
        assert distribution.shape == (4, 4) and np.allclose(distribution.sum(axis=1), 1)
        features = client.predict_array("cli-ghc")
        assert features.dtype == np.int64 and sorted(features.tolist()) == list(range(6))
        job = client.train("mlknn", None, "cli-inline", data=(sp.csr_matrix(X), Y), params={"k": 3})
        assert client.wait(job["job_id"])["status"] == "succeeded"
        assert client.model_version("cli-inline")["label_names"] == ["l0", "l1", "l2"]


def test_client_takes_pandas_frames(server: str, trained: dict[str, dict]) -> None:
    """A DataFrame's column names are the feature and label names, and match features by name."""
    pd = pytest.importorskip("pandas")
    X, Y = make_multilabel(n=40)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(6)])
    labels = pd.DataFrame(Y, columns=["sun", "rain", "snow"])
    with Client(server) as client:
        dataset = client.upload_arrays(frame, labels, name="from-frames")
        assert dataset["label_names"] == ["sun", "rain", "snow"] and dataset["feature_names"] == list(frame.columns)
        by_position = client.predict("cli-mlknn", X[:4], output="ranking")["predictions"]
        shuffled = frame.iloc[:4, ::-1]  # columns in another order: matched by name
        assert client.predict("cli-mlknn", shuffled, output="ranking")["predictions"] == by_position
        job = client.train("mlknn", None, "cli-frames", data=(frame, labels))
        assert client.wait(job["job_id"])["status"] == "succeeded"
        assert client.model_version("cli-frames")["label_names"] == ["sun", "rain", "snow"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_tables_on_a_terminal_fit_its_width_unless_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the boxed table folds cells to its width; --wide folds and crops nothing."""
    long_name = "a-dataset-name-much-longer-than-its-column-could-be-at-sixty-columns"
    rows = [["0123456789abcdef", long_name, "multilabel"]]
    monkeypatch.setenv("COLUMNS", "60")
    for wide in (False, True):
        screen = Terminal()
        monkeypatch.setattr(sys, "stdout", screen)
        monkeypatch.setitem(cli_base.display, "wide", wide)
        cli_base.console.cache_clear()
        cli_base.table("datasets", ["id", "name", "kind"], rows)
        text = re.sub(r"\x1b\[[0-9;]*m", "", screen.getvalue())  # colours and styles
        lines = text.splitlines()
        assert "│" in text and any("0123456789abcdef" in line for line in lines)  # ids never folded
        if wide:
            assert any(long_name in line for line in lines) and max(map(len, lines)) > 60
        else:
            assert max(map(len, lines)) <= 60 and not any(long_name in line for line in lines)
    cli_base.console.cache_clear()


def test_datasets_split_by_name(server: str, datasets: dict[str, dict]) -> None:
    parts = run_json(server, "datasets", "split", "ml", "--test-fraction", "0.25", "--random-state", "1")
    assert parts["train"]["n_samples"] == 30 and parts["test"]["n_samples"] == 10  # type: ignore[index]
    assert parts["test"]["parent_id"] == datasets["ml"]["id"]  # type: ignore[index]
    code, stdout, _ = run(server, "datasets", "split", "ml", "--test-fraction", "0.25", "--random-state", "1")
    assert code == 0 and "ml-train" in stdout and "ml-test" in stdout
    with Client(server) as client:
        again = client.split_dataset(datasets["ml"]["id"], test_fraction=0.25, random_state=1)
    assert again["test"]["id"] == parts["test"]["id"]  # type: ignore[index]


def test_models_export_writes_the_zip(server: str, trained: dict[str, dict], tmp_path: Path) -> None:
    import zipfile

    target = tmp_path / "m.zip"
    code, stdout, stderr = run(server, "models", "export", "cli-mlknn@1", "-o", str(target))
    assert code == 0, stderr
    with zipfile.ZipFile(target) as archive:
        manifest = json.loads(archive.read("manifest.json"))
    assert (
        manifest["name"] == "cli-mlknn" and manifest["version"] == 1 and "scikit-learn" in manifest["library_versions"]
    )
    assert run(server, "models", "export", "cli-mlknn@9", "-o", str(tmp_path / "x.zip"))[0] == 4
    assert not (tmp_path / "x.zip").exists()


def test_train_auto_shows_its_default_seed(server: str, datasets: dict[str, dict]) -> None:
    code, stdout, _ = run(
        server, "train", "auto", datasets["ml"]["id"], "--name", "cli-auto-seed", "-p", "candidates=br,mlknn"
    )
    assert code == 0 and "with random_state 0" in stdout
