"""Loaders for the real benchmark datasets in ``../shared/data`` (see its README.md).

Every loader goes through :func:`app.formats.parse_dataset`, the service's upload parser, so
the benchmarks exercise exactly what ``POST /datasets`` does. Parsed datasets are cached
in-process (benchmarks reload them); the cached arrays are made **read-only** so that one caller
cannot silently change another's data: copy before modifying in place.

* :func:`data_dir` -> the data folder (env ``LABELSERVE_DATA_DIR``, default ``../shared/data``
  relative to the repository root), or ``None`` when it is absent (benchmarks then skip).
* :func:`load_mulan` (Mulan ARFF + XML, official train/test split), :func:`load_mulan_full`
  (train and test stacked; cal500 has only the full file), :func:`load_yahoo` (Yahoo .mat,
  2000/3000 split), :func:`load_ldl` (Geng's LDL .mat). Names are case-insensitive.
"""

from __future__ import annotations

import os
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np

from app.formats import ParsedDataset, ParseOptions, parse_dataset

__all__ = [
    "MULAN_SETS",
    "MULAN_FULL_ONLY",
    "YAHOO_SETS",
    "LDL_SETS",
    "data_dir",
    "require_data_dir",
    "load_mulan",
    "load_mulan_full",
    "load_yahoo",
    "load_ldl",
    "load_scaling",
    "SCALING_SETS",
]

REPO_ROOT = Path(__file__).resolve().parent.parent

MULAN_SETS = ("emotions", "scene", "yeast", "birds", "flags", "genbase", "medical")
MULAN_FULL_ONLY = ("cal500",)
YAHOO_SETS = ("Arts", "Business", "Computers", "Education", "Health", "Recreation", "Reference")
LDL_SETS = ("SJAFFE", "Movie", "Yeast_alpha", "Yeast_cdc", "Yeast_elu")
#: the larger Mulan sets of the growth benchmark (``benchmarks/scaling.py``), by file stem
SCALING_SETS = ("tmc2007-500", "bibtex")


def data_dir() -> Path | None:
    """The benchmark data folder, or ``None`` when it does not exist."""
    configured = os.environ.get("LABELSERVE_DATA_DIR")
    path = Path(configured) if configured else REPO_ROOT.parent / "shared" / "data"
    return path if path.is_dir() else None


def require_data_dir() -> Path:
    """The data folder; ``FileNotFoundError`` when absent (benchmarks check :func:`data_dir`
    first and skip)."""
    path = data_dir()
    if path is None:
        raise FileNotFoundError("benchmark data not found: set LABELSERVE_DATA_DIR or provide ../shared/data")
    return path


def _canonical(name: str, known: tuple[str, ...], what: str) -> str:
    for candidate in known:
        if candidate.lower() == name.lower():
            return candidate
    raise ValueError(f"unknown {what} dataset {name!r}; known: {', '.join(known)}")


def _check_part(part: str) -> None:
    if part not in ("train", "test"):
        raise ValueError(f"part must be 'train' or 'test', got {part!r}")


def _frozen(ds: ParsedDataset) -> ParsedDataset:
    ds.X.flags.writeable = False
    ds.Y.flags.writeable = False
    return ds


def _parse_file(path: Path, labels: Path | None = None, **options: object) -> ParsedDataset:
    """The parsed file as dense float64 arrays (what the methods take; sparse files parse to CSR)."""
    return parse_dataset(
        path.read_bytes(),
        filename=path.name,
        labels_file=labels.read_bytes() if labels is not None else None,
        options=ParseOptions(**options),
    ).dense()


@cache
def _mulan(name: str, part: str) -> ParsedDataset:
    folder = require_data_dir() / "multilabel" / name
    return _frozen(_parse_file(folder / f"{name}-{part}.arff", folder / f"{name}.xml"))


def load_mulan(name: str, part: str = "train") -> ParsedDataset:
    """One half of a Mulan dataset's official train/test split (emotions, scene, yeast, birds,
    flags, genbase, medical). Labels come from the XML file, matched by name, in ARFF order."""
    _check_part(part)
    return _mulan(_canonical(name, MULAN_SETS, "Mulan"), part)


@cache
def _mulan_full(name: str) -> ParsedDataset:
    if name in MULAN_FULL_ONLY:
        folder = require_data_dir() / "multilabel" / name
        return _frozen(_parse_file(folder / f"{name}.arff", folder / f"{name}.xml"))
    train, test = _mulan(name, "train"), _mulan(name, "test")
    if train.feature_names != test.feature_names or train.label_names != test.label_names:
        raise ValueError(f"{name}: train and test files declare different attributes")
    warnings = list(dict.fromkeys(train.warnings + test.warnings))
    return _frozen(
        replace(
            train,
            X=np.concatenate([train.X, test.X]),
            Y=np.concatenate([train.Y, test.Y]),
            warnings=warnings,
        )
    )


def load_mulan_full(name: str) -> ParsedDataset:
    """A whole Mulan dataset: train then test rows stacked (for cross-validation); cal500 has
    only its full file."""
    return _mulan_full(_canonical(name, MULAN_SETS + MULAN_FULL_ONLY, "Mulan"))


@cache
def _yahoo(name: str, part: str) -> ParsedDataset:
    path = require_data_dir() / "multilabel" / "yahoo" / f"{name}.mat"
    return _frozen(_parse_file(path, part=part))


def load_yahoo(name: str, part: str = "train") -> ParsedDataset:
    """One half of a Yahoo web-page set (Arts, Business, Computers, Education, Health,
    Recreation, Reference): 2000 train / 3000 test rows; -1/+1 targets mapped to 0/1."""
    _check_part(part)
    return _yahoo(_canonical(name, YAHOO_SETS, "Yahoo"), part)


@cache
def _ldl(name: str) -> ParsedDataset:
    return _frozen(_parse_file(require_data_dir() / "ldl" / f"{name}.mat"))


def load_ldl(name: str) -> ParsedDataset:
    """A label distribution dataset (SJAFFE, Movie, Yeast_alpha, Yeast_cdc, Yeast_elu)."""
    return _ldl(_canonical(name, LDL_SETS, "LDL"))


@cache
def _scaling(name: str, part: str) -> ParsedDataset:
    folder = require_data_dir() / "multilabel" / name.split("-")[0]
    return _frozen(_parse_file(folder / f"{name}-{part}.arff", folder / f"{name}.xml"))


def load_scaling(name: str, part: str = "train") -> ParsedDataset:
    """One half of a larger Mulan set's official split (tmc2007-500: 21,519 / 7,077 rows, 500
    binary features, 22 labels; bibtex: 4,880 / 2,515 rows, 1,836 features, 159 labels)."""
    _check_part(part)
    return _scaling(_canonical(name, SCALING_SETS, "scaling"), part)
