"""Upload warnings for datasets that parse but look like a mistake (``app/formats/hints.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from app.formats import ParseOptions, parse_dataset
from app.formats.hints import binary_columns, is_binary_column, label_count_hint, numeric_header_hint


def test_binary_column_needs_both_values():
    assert is_binary_column(np.array([0.0, 1.0, 1.0]))
    assert not is_binary_column(np.array([0.0, 0.0]))  # constant: says nothing
    assert not is_binary_column(np.array([0.0, 1.0, 0.5]))
    assert not is_binary_column(np.array([0.0, 1.0, np.nan]))


@pytest.mark.parametrize(
    ("binary", "at_end", "expected"),
    [
        ([False, False, True], True, "label_count=3?"),  # one 0/1 feature before 2 labels
        ([False, True, True], True, "label_count=4?"),
        ([True, False, False], False, "label_count=3?"),  # labels first: the feature after them
        ([False, False, True], False, None),  # not next to the labels
        ([True, True, True], True, None),  # every feature binary (bag of words): no signal
        ([False, False, False], True, None),
    ],
)
def test_label_count_hint_walks_out_from_the_label_block(binary, at_end, expected):
    hint = label_count_hint(["a", "b", "c"], lambda j: binary[j], 2, at_end=at_end)
    assert (hint is None) if expected is None else (hint is not None and expected in hint)


def test_label_count_hint_names_the_columns():
    hint = label_count_hint([f"f{j}" for j in range(10)], lambda j: j > 1, 1, at_end=True)
    assert hint is not None and "8 features ('f2', 'f3', 'f4', 'f5', 'f6' and 3 more)" in hint


def test_numeric_header_hint():
    assert numeric_header_hint(["0.5", "1", "-2e3"]) is not None
    assert numeric_header_hint(["0.5", "x"]) is None


def test_csv_without_header_row_and_duplicate_numbers():
    ok = parse_dataset(b"0.5,2,1\n0.2,0.3,0\n0.1,0.9,1\n", filename="a.csv", options=ParseOptions(label_count=1))
    assert ok.n_samples == 2 and any("no header row?" in w for w in ok.warnings)
    with pytest.raises(ValueError, match="appears more than once; every CSV column name is a number"):
        parse_dataset(b"0.5,1,1\n0.2,0.3,0\n0.1,0.9,1\n", filename="a.csv", options=ParseOptions(label_count=1))


def test_csv_label_count_start():
    csv = b"l0,l1,x\n1,0,0.5\n0,1,0.2\n1,1,0.7\n"
    warned = parse_dataset(csv, filename="a.csv", options=ParseOptions(label_count=1, label_location="start"))
    assert warned.feature_names == ["l1", "x"] and "'l1'" in warned.warnings[0]
    right = parse_dataset(csv, filename="a.csv", options=ParseOptions(label_count=2, label_location="start"))
    assert right.warnings == []


ARFF = b"""@relation 'toy: -C 1'
@attribute l0 {0,1}
@attribute l1 {0,1}
@attribute x numeric
@data
1,0,0.5
0,1,0.2
0,0,0.7
"""


def test_arff_meka_header_too_small():
    ds = parse_dataset(ARFF, filename="t.arff")
    (warning,) = ds.warnings
    assert "'l1' holds only 0/1 (declared {0,1}) right after the 1 label column(s)" in warning
    assert "label_count=2?" in warning


def test_arff_labels_named_are_not_second_guessed():
    ds = parse_dataset(ARFF, filename="t.arff", options=ParseOptions(label_columns=["l0"]))
    assert ds.warnings == []


def test_sparse_columns_are_judged_in_one_pass():
    import scipy.sparse as sp

    X = sp.csr_matrix(np.array([[1.0, 0.5, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0], [1.0, 0.2, 0.0, 1.0]]))
    is_binary = binary_columns(X)
    assert [is_binary(j) for j in range(4)] == [True, False, False, False]  # constant 0 or 1: no signal
    dense = binary_columns(X.toarray())
    assert [dense(j) for j in range(4)] == [True, False, False, False]


def test_sparse_arff_meka_header_too_small():
    text = b"""@relation 'toy: -C 1'
@attribute l0 {0,1}
@attribute l1 {0,1}
@attribute x numeric
@data
{0 1,2 0.5}
{1 1,2 0.2}
{2 0.7}
"""
    ds = parse_dataset(text, filename="t.arff")
    assert any("'l1' holds only 0/1 (declared {0,1})" in w for w in ds.warnings)
