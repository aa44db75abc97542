"""Every file the service reads from its package at run time ships in a non-editable install.

The container image installs the project as a wheel (``pip install .``): a template, stylesheet or
migration script that the ``package-data`` globs of ``pyproject.toml`` miss exists in a checkout
but not in the image, where the app then fails at start-up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_package_data_globs_cover_every_non_python_file_of_the_app() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["app"]
    package = ROOT / "app"
    shipped = {path for pattern in globs for path in package.glob(pattern)}
    data_files = {
        path
        for path in package.rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"} and "__pycache__" not in path.parts
    }
    assert data_files, "the app has data files (templates, assets, the migration template)"
    missing = sorted(str(path.relative_to(package)) for path in data_files - shipped)
    assert not missing, f"not in [tool.setuptools.package-data]: {missing}"
