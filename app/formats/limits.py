"""Bounds on what an upload may become once parsed, checked before the arrays are allocated.

Upload size alone bounds nothing: 23 bytes of LIBSVM can declare 30 million features, and a
compressed MAT file or a sparse ARFF of a few hundred kilobytes can expand to gigabytes. Every
parser therefore reads the dimensions first (declared in a header, or discovered cheaply: a
CSV header and its line count, LIBSVM's sparse matrix, a MAT variable header) and calls
:func:`check_dimensions` before it builds a dense matrix. The defaults admit every benchmark set
the service is evaluated on (the largest, Movie, is 7755 x 1869 + 5 = 14.5 million values; the
most labels, cal500, 174) with room to spare;

The cell limit counts *stored* values: every cell of a dense table, but only the non-zeros of a
sparse one (sparse ARFF, LIBSVM), whose label matrix is counted in full (it is stored as a 0/1
table, one bit a cell, and handed to the methods as one). A 3 MiB sparse file of 12,920 rows x
500 features at 2% density is 0.13 million stored feature values, not 6.5 million cells.
 the settings ``LABELSERVE_MAX_DATASET_CELLS``,
``LABELSERVE_MAX_DATASET_FEATURES`` and ``LABELSERVE_MAX_DATASET_LABELS`` change them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .common import DatasetTooLarge

DEFAULT_MAX_CELLS = 20_000_000  # 160 MB per float64 copy
DEFAULT_MAX_FEATURES = 50_000
DEFAULT_MAX_LABELS = 5_000


@dataclass(frozen=True)
class DatasetLimits:
    """Largest dataset accepted: values (samples x (features + labels)), features, labels."""

    max_cells: int = DEFAULT_MAX_CELLS
    max_features: int = DEFAULT_MAX_FEATURES
    max_labels: int = DEFAULT_MAX_LABELS

    def check_features(self, n_features: int, what: str = "features") -> None:
        if n_features > self.max_features:
            raise DatasetTooLarge(
                f"the dataset would have {n_features} {what}; at most {self.max_features} are accepted "
                "(LABELSERVE_MAX_DATASET_FEATURES)"
            )

    def check_labels(self, n_labels: int, what: str = "labels") -> None:
        if n_labels > self.max_labels:
            raise DatasetTooLarge(
                f"the dataset would have {n_labels} {what}; at most {self.max_labels} are accepted "
                "(LABELSERVE_MAX_DATASET_LABELS)"
            )

    def check_columns(self, n_columns: int) -> None:
        """A table of ``n_columns`` (features and labels together) before they are told apart."""
        most = self.max_features + self.max_labels
        if n_columns > most:
            raise DatasetTooLarge(
                f"the dataset would have {n_columns} columns; at most {most} are accepted "
                "(LABELSERVE_MAX_DATASET_FEATURES + LABELSERVE_MAX_DATASET_LABELS)"
            )

    def check_cells(self, n_samples: int, n_columns: int, qualifier: str = "") -> None:
        cells = n_samples * n_columns
        if cells > self.max_cells:
            raise DatasetTooLarge(
                f"the dataset would hold {qualifier}{n_samples} samples x {n_columns} columns = {cells} values; "
                f"at most {self.max_cells} are accepted (LABELSERVE_MAX_DATASET_CELLS)"
            )

    def check_sparse(self, n_samples: int, nnz: int, n_labels: int, qualifier: str = "") -> None:
        """A sparse dataset: its ``nnz`` stored feature values and its ``n_samples x n_labels`` label cells."""
        values = nnz + n_samples * n_labels
        if values > self.max_cells:
            raise DatasetTooLarge(
                f"the sparse dataset would hold {qualifier}{nnz} non-zero feature values + {n_samples} samples x "
                f"{n_labels} labels = {values} values; at most {self.max_cells} are accepted "
                "(LABELSERVE_MAX_DATASET_CELLS)"
            )


def check_dimensions(
    limits: DatasetLimits, n_samples: int, n_features: int, n_labels: int, nnz: int | None = None
) -> None:
    """Raise :class:`DatasetTooLarge` when a dataset of these dimensions exceeds ``limits``
    (``nnz``: the stored feature values of a sparse dataset, which the cell limit counts)."""
    limits.check_features(n_features)
    limits.check_labels(n_labels)
    if nnz is None:
        limits.check_cells(n_samples, n_features + n_labels)
    else:
        limits.check_sparse(n_samples, nnz, n_labels)
