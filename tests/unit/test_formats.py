"""Upload parsers on small generated content: every format, option and rejection path."""

from __future__ import annotations

import io
import re
import time

import numpy as np
import pytest
import scipy.io
import scipy.sparse
from pydantic import ValidationError

from app.config import Settings
from app.errors import PayloadTooLarge
from app.formats import DatasetFormatError, DatasetLimits, DatasetTooLarge, ParseOptions, detect_format, parse_dataset
from app.formats.limits import check_dimensions
from app.formats.validation import finalize


def parse(content: str | bytes, filename: str | None = None, labels: str | None = None, **opts):
    data = content.encode() if isinstance(content, str) else content
    return parse_dataset(
        data,
        filename=filename,
        labels_file=labels.encode() if labels is not None else None,
        options=ParseOptions(**opts),
    )


def rejects(match: str, content, filename=None, labels=None, **opts) -> str:
    with pytest.raises(DatasetFormatError, match=match) as info:
        parse(content, filename, labels, **opts)
    return str(info.value)


# ---------------------------------------------------------------------------------- ARFF

ARFF = """% a comment
@relation test
@attribute f1 numeric
@attribute color {red,green,blue}
@attribute flag {YES,NO}
@attribute id string
@attribute 'lab\\'a' {0,1}
@attribute labb {0,1}
@data
1.5,red,YES,'x1',1,0
-2,blue,NO,'x2',0,1
% comment inside data
3,green,YES,'x3',1,1
"""
XML = """<?xml version="1.0" encoding="utf-8"?>
<labels xmlns="http://mulan.sourceforge.net/labels">
<label name="labb"></label>
<label name="lab'a"></label>
</labels>"""


def test_arff_mulan_xml_matched_by_name_in_arff_order():
    ds = parse(ARFF, "t.arff", XML)
    # XML lists labb first; columns keep the ARFF order; the escaped quote is normalised
    assert ds.label_names == ["lab'a", "labb"]
    assert ds.feature_names == ["f1", "color", "flag"]
    np.testing.assert_array_equal(ds.Y, [[1, 0], [0, 1], [1, 1]])
    assert ds.kind == "multilabel"


def test_arff_nominal_encoding_and_string_dropped():
    ds = parse(ARFF, "t.arff", XML)
    # color ordinal by declaration (red 0, green 1, blue 2); YES -> 1, NO -> 0
    np.testing.assert_array_equal(ds.X, [[1.5, 0, 1], [-2, 2, 0], [3, 1, 1]])
    assert ds.X.dtype == np.float64 and ds.Y.dtype == np.uint8
    assert any("string attribute" in w and "id" in w for w in ds.warnings)
    assert any("0-based position" in w and "color" in w for w in ds.warnings)


def test_arff_numeric_nominal_uses_the_number():
    text = """@relation r
@attribute code {3,1,7}
@attribute x numeric
@attribute l {1,0}
@data
7,0.5,1
1,0.25,0
"""
    ds = parse(text, "r.arff", label_count=1)
    np.testing.assert_array_equal(ds.X, [[7, 0.5], [1, 0.25]])
    np.testing.assert_array_equal(ds.Y, [[1], [0]])
    assert ds.warnings == []


@pytest.mark.parametrize(
    ("header", "labels", "features"),
    [
        ("-C 2", ["f1", "color"], ["flag", "lab'a", "labb"]),
        ("-C -2", ["lab'a", "labb"], ["f1", "color", "flag"]),
    ],
)
def test_arff_meka_header(header, labels, features):
    text = ARFF.replace("@relation test", f"@relation 'test: {header}'")
    if header == "-C 2":  # first two attributes as labels need 0/1 values
        text = text.replace("1.5,red", "1,red").replace("-2,blue", "0,red").replace("3,green", "1,red")
    ds = parse(text, "t.arff")
    assert ds.label_names == labels
    assert ds.feature_names == features


def test_arff_label_count_and_location():
    ds = parse(ARFF, "t.arff", label_count=2)
    assert ds.label_names == ["lab'a", "labb"]
    text = ARFF.replace("1.5,red", "1,red").replace("-2,blue", "0,red").replace("3,green", "1,red")
    ds = parse(text, "t.arff", label_count=1, label_location="start")
    assert ds.label_names == ["f1"] and ds.feature_names[0] == "color"


def test_arff_label_columns_option():
    ds = parse(ARFF, "t.arff", label_columns="labb")
    assert ds.label_names == ["labb"]
    assert "lab'a" in ds.feature_names


def test_arff_sparse():
    text = """@relation sparse
@attribute a numeric
@attribute b numeric
@attribute n {x,y}
@attribute l1 {0,1}
@attribute l2 {0,1}
@data
{0 1.5,3 1}
{1 2,2 y,4 1}
{}
"""
    ds = parse(text, "s.arff", label_count=2)
    # omitted numeric -> 0, omitted nominal -> first declared value (x -> ordinal 0); kept sparse
    assert scipy.sparse.isspmatrix_csr(ds.X) and ds.X.nnz == 3 and ds.Y.dtype == np.uint8
    np.testing.assert_array_equal(ds.X.toarray(), [[1.5, 0, 0], [0, 2, 1], [0, 0, 0]])
    np.testing.assert_array_equal(ds.Y, [[1, 0], [0, 1], [0, 0]])


def test_sparse_arff_omitted_nominal_whose_first_value_is_not_zero():
    # WEKA's rule: an omitted value is the first declared one, here 1 ({1,0}) and yes (1)
    text = """@relation s
@attribute a {1,0}
@attribute b {yes,no}
@attribute c numeric
@attribute l {0,1}
@data
{0 0,2 3}
{1 no,3 1}
{}
"""
    ds = parse(text, "s.arff", label_count=1)
    np.testing.assert_array_equal(ds.X.toarray(), [[0, 1, 3], [1, 0, 0], [1, 1, 0]])
    np.testing.assert_array_equal(ds.Y, [[0], [1], [0]])


def test_sparse_arff_quoted_values_read_by_liac_arff_agree_with_plain_rows():
    head = "@relation s\n@attribute a {'x y',z}\n@attribute b numeric\n@attribute l {0,1}\n@data\n"
    quoted = parse(head + "{0 'x y',1 2}\n{0 z,2 1}\n", "s.arff", label_count=1)  # liac-arff's COO reader
    plain = parse(head + "{1 2}\n{0 z,2 1}\n", "s.arff", label_count=1)  # the regular-expression reader
    np.testing.assert_array_equal(quoted.X.toarray(), [[0, 2], [1, 0]])
    np.testing.assert_array_equal(quoted.X.toarray(), plain.X.toarray())
    np.testing.assert_array_equal(quoted.Y, plain.Y)


def test_sparse_arff_errors_in_the_services_words_with_their_line():
    head = "@relation s\n@attribute a {x,z}\n@attribute l {0,1}\n@data\n"
    msg = rejects(
        "ARFF data: a value is not among its nominal attribute's declared values",
        head + "{0 x}\n{0 w,1 1}\n",
        "s.arff",
        label_count=1,
    )
    assert msg.endswith("(line 6): 'w'"), msg
    rejects("ARFF data: .*line 5", head + "{7 1}\n", "s.arff", label_count=1)


@pytest.mark.parametrize("row", ["{0 1,0 2,2 1}", "{0 'x',0 'y',2 1}"])  # the plain reader and liac-arff's
def test_sparse_arff_index_given_twice_is_refused_with_its_line(row):
    """``{0 1, 0 2}`` had been accepted (the CSR matrix summed the two values)."""
    head = "@relation s\n@attribute a numeric\n@attribute b string\n@attribute l {0,1}\n@data\n{0 1,2 0}\n"
    head = head.replace("@attribute a numeric", "@attribute a {'x','y',1,2}") if "'" in row else head
    rejects(
        r"attribute index 0 \('a'\) is given twice in data row 2 \(line 7\)", head + row + "\n", "s.arff", label_count=1
    )


LIBRARY_TEXTS = (
    "Bad @",
    "not found in nominal declaration",
    "invalid literal",
    "could not convert",
    "codec can't decode",
    "Expecting value",
    "syntax error",
    "n_features was set",
    "SVMlight",
    "Unknown mat file",
    "unclosed token",
)


@pytest.mark.parametrize(
    ("content", "filename", "opts", "ours"),
    [
        (
            ARFF.replace("numeric", "numerix"),
            "t.arff",
            {"labels": XML},
            "ARFF header: an @attribute has an unknown type",
        ),
        (
            ARFF.replace("1.5,red", "abc,red"),
            "t.arff",
            {"labels": XML},
            "ARFF data: a value of a numeric attribute is not a number (line 10)",
        ),
        (ARFF, "t.arff", {"labels": "<labels><label name='a'>"}, "labels file is not valid XML (at line 1, column"),
        (
            b"a,\xff\xfeb,y\n1,2,1\n3,4,0\n",
            "d.csv",
            {"label_count": 1},
            "CSV header (line 1) is not valid UTF-8 (byte 3)",
        ),
        ("0 1:1 7:2\n1 2:1\n", "d.svm", {"n_features": 3}, "LIBSVM: a feature index is larger than n_features=3"),
        (
            "0 1:1\n1 3:1 2:1\n",
            "d.svm",
            {},
            "LIBSVM: the feature indices of a line must increase, each given once (line 2)",
        ),
        ("0 1:1\n1 -1:1\n", "d.svm", {}, "LIBSVM: a feature index is negative"),
        (b"MATLAB 5.0 garbage" + b"\0" * 200, "x.mat", {}, "MAT: not a readable MATLAB file: it is corrupt"),
    ],
)
def test_format_errors_are_worded_by_the_service_not_its_libraries(content, filename, opts, ours):
    labels = opts.pop("labels", None)
    msg = rejects(re.escape(ours), content, filename, labels, **opts)
    assert not [text for text in LIBRARY_TEXTS if text in msg], msg


def test_label_columns_that_are_not_json_say_where():
    with pytest.raises(ValidationError) as info:
        ParseOptions(label_columns='["y1", y2]')
    assert "label_columns is not a valid JSON array (it breaks at character 8)" in str(info.value)
    assert "Expecting value" not in str(info.value)


def test_sparse_arff_missing_value_names_its_line():
    text = "@relation s\n@attribute a numeric\n@attribute l {0,1}\n@data\n{0 1}\n% c\n{0 ?,1 1}\n"
    rejects("missing value '\\?' for attribute 'a' at data row 2 \\(line 7\\)", text, "s.arff", label_count=1)


def test_sparse_arff_non_binary_labels_judged_by_the_label_checks():
    text = "@relation s\n@attribute a numeric\n@attribute l numeric\n@data\n{0 1,1 0.5}\n{1 1}\n"
    rejects("neither 0/1 nor distributions", text, "s.arff", label_count=1)


def test_sparse_and_dense_arff_of_the_same_table_agree():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 4, size=(40, 12)) * (rng.random((40, 12)) < 0.2)
    Y = (rng.random((40, 5)) < 0.3).astype(int)
    head = "@relation r\n" + "".join(f"@attribute f{j} numeric\n" for j in range(12))
    head += "".join(f"@attribute l{k} {{0,1}}\n" for k in range(5)) + "@data\n"
    table = np.hstack([X, Y])
    dense = head + "".join(",".join(str(v) for v in row) + "\n" for row in table)
    sparse = head + "".join("{" + ",".join(f"{j} {v}" for j, v in enumerate(row) if v) + "}\n" for row in table)
    a, b = parse(dense, "d.arff", label_count=5), parse(sparse, "s.arff", label_count=5)
    assert isinstance(a.X, np.ndarray) and scipy.sparse.isspmatrix_csr(b.X)
    np.testing.assert_array_equal(a.X, b.X.toarray())
    np.testing.assert_array_equal(a.Y, b.Y)
    assert a.Y.dtype == b.Y.dtype == np.uint8


def test_arff_identifier_attribute_dropped_with_warning():
    rows = "\n".join(f"P{i},{i * 0.5},{i % 2}" for i in range(12))
    values = ",".join(f"P{i}" for i in range(20))
    text = f"@relation g\n@attribute protein {{{values}}}\n@attribute x numeric\n@attribute l {{0,1}}\n@data\n{rows}\n"
    ds = parse(text, "g.arff", label_count=1)
    assert ds.feature_names == ["x"]
    assert any("identifier attribute 'protein'" in w for w in ds.warnings)


def test_arff_utf8_and_latin1_names():
    text = "@relation r\n@attribute 'caf\u00e9' numeric\n@attribute l {0,1}\n@data\n1,0\n2,1\n"
    assert parse(text.encode("utf-8"), "r.arff", label_count=1).feature_names == ["caf\u00e9"]
    ds = parse(text.encode("latin-1"), "r.arff", label_count=1)
    assert ds.feature_names == ["caf\u00e9"]
    assert any("Latin-1" in w for w in ds.warnings)


def test_arff_latin1_byte_deep_in_the_data_section():
    rows = "".join(f"{i},0,'row{i}'\n" for i in range(3000))  # > the 8 KiB decoder chunk
    text = (
        f"@relation r\n@attribute x numeric\n@attribute l {{0,1}}\n@attribute s string\n@data\n{rows}5,1,'caf\u00e9'\n"
    )
    ds = parse(text.encode("latin-1"), "r.arff", label_columns="l")
    assert ds.X.shape == (3001, 1) and ds.Y[-1, 0] == 1
    assert any("Latin-1" in w for w in ds.warnings)


def test_arff_more_rows_than_one_block():
    from app.formats import arff_format

    rows = "".join(f"{i},{i % 2}\n" for i in range(arff_format.BLOCK_ROWS * 2 + 5))
    ds = parse(f"@relation r\n@attribute x numeric\n@attribute l {{0,1}}\n@data\n{rows}", "r.arff", label_count=1)
    n = arff_format.BLOCK_ROWS * 2 + 5
    np.testing.assert_array_equal(ds.X[:, 0], np.arange(n))
    np.testing.assert_array_equal(ds.Y[:, 0], np.arange(n) % 2)
    bad = rows.replace(f"\n{arff_format.BLOCK_ROWS + 7},1\n", f"\n{arff_format.BLOCK_ROWS + 7},?\n")
    msg = rejects(
        "missing value",
        f"@relation r\n@attribute x numeric\n@attribute l {{0,1}}\n@data\n{bad}",
        "r.arff",
        label_count=1,
    )
    assert f"data row {arff_format.BLOCK_ROWS + 8} (line {arff_format.BLOCK_ROWS + 12})" in msg


def test_arff_rejections():
    msg = rejects("cannot tell which ARFF attributes are labels", ARFF, "t.arff")
    assert "labels_file" in msg and "label_count" in msg
    rejects("not attributes of the ARFF file: 'nope'", ARFF, "t.arff", XML.replace('name="labb"', 'name="nope"'))
    rejects("not valid XML", ARFF, "t.arff", "<labels><label name='a'>")
    rejects("no <label", ARFF, "t.arff", "<labels/>")
    msg = rejects("missing value", ARFF.replace("-2,blue", "?,blue"), "t.arff", XML)
    assert "'f1'" in msg and "line 11" in msg and "data row 2" in msg
    msg = rejects("ARFF data", ARFF.replace("-2,blue", "-2,purple"), "t.arff", XML)
    assert "purple" in msg and "line 11" in msg
    msg = rejects("ARFF data", ARFF.replace("-2,blue,NO", "-2,blue"), "t.arff", XML)
    assert "line 11" in msg
    rejects("ARFF header", ARFF.replace("numeric", "numerix"), "t.arff", XML)
    rejects("only 6 attributes", ARFF, "t.arff", label_count=6)
    rejects("MEKA header", ARFF.replace("@relation test", "@relation 'x: -C 0'"), "t.arff")
    rejects("label attribute 'id' is a string", ARFF, "t.arff", label_columns=["id"])
    msg = rejects(
        r"ARFF data: a value is not among its nominal attribute's declared values \(line 10\): '2'",
        ARFF.replace("1,0\n-2", "1,2\n-2"),
        "t.arff",
        XML,
    )
    numeric_label = ARFF.replace("labb {0,1}", "labb numeric").replace("1,0\n-2", "1,2\n-2")
    msg = rejects("labels are neither", numeric_label, "t.arff", XML)
    assert "data row 1 (line 10) sums to 3.0" in msg and "'labb' = 2.0" in msg


# ---------------------------------------------------------------------------------- CSV

CSV = "a,b,y1,y2\n1,2,0,1\n3,4.5,1,1\n5,6,0,0\n"


@pytest.mark.parametrize(
    "opts",
    [
        {"label_columns": '["y1", "y2"]'},
        {"label_columns": "y1, y2"},
        {"label_columns": ["y2", "y1"]},
        {"label_count": 2},
    ],
)
def test_csv_label_selection(opts):
    ds = parse(CSV, "d.csv", **opts)
    assert ds.feature_names == ["a", "b"] and ds.label_names == ["y1", "y2"]
    np.testing.assert_array_equal(ds.X, [[1, 2], [3, 4.5], [5, 6]])
    np.testing.assert_array_equal(ds.Y, [[0, 1], [1, 1], [0, 0]])


def test_csv_label_columns_anywhere_and_label_location_start():
    text = "y,a,b\n1,2,3\n0,4,5\n"
    ds = parse(text, "d.csv", label_count=1, label_location="start")
    assert ds.label_names == ["y"] and ds.feature_names == ["a", "b"]
    ds = parse(text, "d.csv", label_columns="y")
    np.testing.assert_array_equal(ds.X, [[2, 3], [4, 5]])


def test_csv_semicolon_and_quotes():
    ds = parse('a;"b";y\n1;"2";1\n3;4;0\n', "d.csv", label_count=1)
    assert ds.feature_names == ["a", "b"]
    np.testing.assert_array_equal(ds.X, [[1, 2], [3, 4]])


def test_csv_rejections():
    rejects("needs label_columns", CSV, "d.csv")
    rejects(r"not in the CSV header: 'zz'", CSV, "d.csv", label_columns="zz")
    rejects("label_count=4 but the CSV has only 4 columns", CSV, "d.csv", label_count=4)
    msg = rejects("CSV line 3, column 'b'", CSV.replace("4.5", "abc"), "d.csv", label_count=2)
    assert "'abc' is not a number" in msg
    rejects("CSV line 4 has 3 values, the header has 4", CSV.replace("5,6,0,0", "5,6,0"), "d.csv", label_count=2)
    rejects("'a' appears more than once", "a,a,y\n1,2,1\n3,4,0\n", "d.csv", label_count=1)
    rejects("column 2 has no name", "a,,y\n1,2,1\n3,4,0\n", "d.csv", label_count=1)
    msg = rejects("feature 'b'", CSV.replace("4.5", "nan"), "d.csv", label_count=2)
    assert "data row 2" in msg and "missing" in msg
    rejects("feature 'a' .* is inf", CSV.replace("5,6", "inf,6"), "d.csv", label_count=2)
    rejects("at least 2 samples, found 1", "a,y\n1,0\n", "d.csv", label_count=1)
    rejects("header but no data rows", "a,y\n \n", "d.csv", label_count=1)


def test_names_with_control_or_direction_characters_refused():
    rejects(
        r"feature name 'a\\x01' \(feature 1\) contains a control character",
        "a\x01,b,y\n1,2,1\n3,4,0\n",
        "d.csv",
        label_count=1,
    )
    msg = rejects("label name", "a,b,y\u202e\n1,2,1\n3,4,0\n", "d.csv", label_count=1)
    assert "contains a direction control character (U+202E at position 2)" in msg


def test_csv_minus_one_plus_one_mapped():
    ds = parse("a,y1,y2\n1,-1,1\n2,1,-1\n", "d.csv", label_count=2)
    np.testing.assert_array_equal(ds.Y, [[0, 1], [1, 0]])
    assert ds.kind == "multilabel"
    assert any("-1/+1" in w for w in ds.warnings)


def test_distribution_detection_and_renormalisation():
    ds = parse("a,d1,d2,d3\n1,0.2,0.3,0.5\n2,0.1,0.1,0.8000001\n", "d.csv", label_count=3)
    assert ds.kind == "distribution"
    np.testing.assert_allclose(ds.Y.sum(axis=1), 1.0, atol=1e-15)
    # one label per row (all 0/1) is multi-label, not a distribution
    assert parse("a,y1,y2\n1,1,0\n2,0,1\n", "d.csv", label_count=2).kind == "multilabel"


def test_label_value_rejections():
    msg = rejects("row 2 sums to 0.9", "a,d1,d2\n1,0.5,0.5\n2,0.4,0.5\n", "d.csv", label_count=2)
    assert "'d1' = 0.4" in msg
    msg = rejects("is -0.5", "a,d1,d2\n1,1.5,-0.5\n2,0.5,0.5\n", "d.csv", label_count=2)
    assert "label 'd2' (label column 2) at data row 1" in msg
    msg = rejects("is -1 but", "a,y1,y2\n1,-1,0\n2,1,1\n", "d.csv", label_count=2)
    assert "'y2' (label column 2) at data row 1 is 0.0" in msg
    rejects("labels are neither", "a,y1,y2\n1,2,0\n2,1,1\n", "d.csv", label_count=2)


# ---------------------------------------------------------------------------------- LIBSVM


def test_libsvm_multilabel():
    text = "0,2 1:0.5 3:1\n 2:1\n1 1:2 2:3\n"
    ds = parse(text, "d.svm")
    assert scipy.sparse.isspmatrix_csr(ds.X) and ds.X.nnz == 5 and ds.Y.dtype == np.uint8
    np.testing.assert_array_equal(ds.X.toarray(), [[0.5, 0, 1], [0, 1, 0], [2, 3, 0]])
    np.testing.assert_array_equal(ds.Y, [[1, 0, 1], [0, 0, 0], [0, 1, 0]])
    assert ds.feature_names == ["f0", "f1", "f2"] and ds.label_names == ["l0", "l1", "l2"]
    ds = parse(text, "d.svm", label_count=5, n_features=4)
    assert ds.Y.shape == (3, 5) and ds.X.shape == (3, 4)


def test_libsvm_rejections():
    rejects("label id 2 is out of range for label_count=2", "0,2 1:1\n1 2:1\n", "d.svm", label_count=2)
    rejects("LIBSVM line 2: label id -1 is not a non-negative integer", "0 1:1\n-1 2:1\n", "d.svm")
    rejects("LIBSVM: .*n_features", "0 1:1 7:2\n1 2:1\n", "d.svm", n_features=3)
    message = rejects("LIBSVM: cannot parse the file: expected lines", "0 1:abc\n1 2:1\n", "d.svm")
    assert "literal" not in message and "float" not in message  # no Python conversion texts
    message = rejects("LIBSVM: cannot parse", "0 x:1\n1 2:1\n", "d.svm")
    assert "int()" not in message


# ---------------------------------------------------------------------------------- MAT


def mat_bytes(**variables) -> bytes:
    buffer = io.BytesIO()
    scipy.io.savemat(buffer, variables)
    return buffer.getvalue()


def test_mat_ldl_layout():
    rng = np.random.default_rng(0)
    labels = rng.dirichlet(np.ones(4), size=6)
    ds = parse(mat_bytes(features=rng.random((6, 3)), labels=labels), "x.mat")
    assert ds.kind == "distribution"
    assert ds.X.shape == (6, 3) and ds.label_names == ["l0", "l1", "l2", "l3"]
    np.testing.assert_allclose(ds.Y, labels)


def test_mat_train_test_layout_minus_one_plus_one_and_sparse():
    rng = np.random.default_rng(1)
    train_y = np.where(rng.random((3, 5)) < 0.5, 1, -1).astype(np.int16)  # q x n
    test_y = np.where(rng.random((3, 4)) < 0.5, 1, -1).astype(np.int16)
    content = mat_bytes(
        train_data=scipy.sparse.csr_matrix(rng.random((5, 2))),
        train_target=train_y,
        test_data=rng.random((4, 2)),
        test_target=test_y,
    )
    train = parse(content, "y.mat")
    np.testing.assert_array_equal(train.Y, (train_y.T == 1).astype(float))
    assert train.X.shape == (5, 2) and train.kind == "multilabel"
    assert any("-1/+1" in w for w in train.warnings)
    test = parse(content, "y.mat", part="test")
    np.testing.assert_array_equal(test.Y, (test_y.T == 1).astype(float))


def test_mat_n_by_q_target_accepted_with_warning():
    content = mat_bytes(data=np.arange(8.0).reshape(4, 2), target=np.eye(4)[:, :3])
    ds = parse(content, "y.mat")
    assert ds.Y.shape == (4, 3) and any("n x q" in w for w in ds.warnings)


def test_mat_reader_crash_is_a_format_error():
    # an invalid data-type code in the data tag of `labels` makes scipy 1.17's reader segfault;
    # it runs in a child process, so this is a clean rejection
    content = bytearray(mat_bytes(features=np.ones((5, 3)), labels=np.full((5, 2), 0.5)))
    tag = content.index(b"labels") + 8
    content[tag + 1] = 0x30
    msg = rejects("MAT: ", bytes(content), "x.mat")
    assert "corrupt" in msg or "not a readable MATLAB file" in msg


def test_mat_v73_rejected():
    content = (
        b"MATLAB 7.3 MAT-file, Platform: GLNXA64, HDF5 schema 1.00 .".ljust(116)
        + b"\0" * 8
        + b"\x00\x02IM"
        + b"\0" * 400
    )
    rejects("v7.3", content, "x.mat")


def test_mat_rejections():
    rejects("expected 'features' and 'labels'.*'test_data'", mat_bytes(foo=np.ones((2, 2))), "x.mat", part="test")
    rejects(
        "has shape \\(3, 3\\); expected q x 5",
        mat_bytes(data=np.ones((5, 2)), target=np.ones((3, 3))),
        "x.mat",
    )
    rejects("not a numeric matrix", mat_bytes(features=np.array(["ab", "cd"]), labels=np.ones((2, 1))), "x.mat")
    rejects("not a readable MATLAB file", b"MATLAB 5.0 garbage" + b"\0" * 200, "x.mat")
    rejects(
        "6 feature rows but 5 label rows",
        mat_bytes(features=np.ones((6, 2)), labels=np.full((5, 2), 0.5)),
        "x.mat",
    )


# ---------------------------------------------------------------------------------- dispatch


def test_detect_format():
    assert detect_format(b"", "a.ARFF") == "arff"
    assert detect_format(b"", "a.tsv") == "csv"
    assert detect_format(b"", "a.libsvm") == "libsvm"
    assert detect_format(mat_bytes(x=np.ones(2)), None) == "mat"
    assert detect_format(ARFF.encode(), "data.txt") == "arff"
    assert detect_format(b"0,3 1:0.5 4:1\n", None) == "libsvm"
    assert detect_format(b" 1:0.5\n", None) == "libsvm"
    assert detect_format(CSV.encode(), None) == "csv"


def test_auto_detection_parses_without_filename():
    assert parse(ARFF, None, XML).label_names == ["lab'a", "labb"]
    assert parse(CSV, None, label_count=2).n_features == 2
    assert parse("0 1:1\n1 2:1\n", None).n_labels == 2


def test_explicit_format_overrides_extension():
    assert parse(CSV, "d.txt", format="csv", label_count=2).n_labels == 2


def test_dispatch_rejections():
    rejects("empty", b"", "d.csv")
    rejects("applies to ARFF only", CSV, "d.csv", XML, label_count=2)


def test_parse_options_validation():
    assert ParseOptions(label_columns="").label_columns is None
    assert ParseOptions(label_columns='["a","b"]').label_columns == ["a", "b"]
    with pytest.raises(ValidationError):
        ParseOptions(label_columns="[not json")
    with pytest.raises(ValidationError):
        ParseOptions(label_columns="a,a")
    with pytest.raises(ValidationError):
        ParseOptions(label_count=0)
    with pytest.raises(ValidationError):
        ParseOptions(part="valid")
    with pytest.raises(ValidationError):
        ParseOptions(colour="red")


def test_dataset_format_error_is_value_error():
    assert issubclass(DatasetFormatError, ValueError)


# ------------------------------------------------------------- dataset limits and hostile input


def too_large(match: str, content, filename=None, labels=None, limits=None, **opts) -> str:
    with pytest.raises(DatasetTooLarge, match=match) as info:
        parse_dataset(
            content.encode() if isinstance(content, str) else content,
            filename=filename,
            labels_file=labels.encode() if labels is not None else None,
            options=ParseOptions(**opts),
            limits=limits,
        )
    assert info.value.status_code == 413
    return str(info.value)


def test_dataset_too_large_is_a_413_and_a_format_error():
    assert issubclass(DatasetTooLarge, PayloadTooLarge) and issubclass(DatasetTooLarge, DatasetFormatError)
    assert DatasetTooLarge("x").status_code == 413 and DatasetFormatError("x").status_code == 422


def test_default_limits_admit_the_largest_benchmark_shapes():
    # Movie (7755 x 1869, 5 labels) has the most values, cal500 the most labels (174), medical the
    # most features of the Mulan sets (1449)
    check_dimensions(DatasetLimits(), 7755, 1869, 5)
    check_dimensions(DatasetLimits(), 502, 68, 174)
    check_dimensions(DatasetLimits(), 978, 1449, 45)


def test_libsvm_huge_index_refused_before_densifying():
    # 23 bytes that used to become a 2 x 30,000,001 dense matrix (4.6 GB of server memory)
    msg = too_large("30000000 features", b"0 1:1 30000000:1\n1 1:2\n", "d.svm")
    assert "at most 50000" in msg and "LABELSERVE_MAX_DATASET_FEATURES" in msg


@pytest.mark.parametrize(
    ("opts", "match"),
    [({"n_features": 10**10}, "10000000000 features"), ({"label_count": 10**10}, "10000000000 labels")],
)
def test_libsvm_declared_dimensions_refused_before_allocating(opts, match):
    # these raised MemoryError (a 500) from np.zeros((n, 1e10))
    too_large(match, "0 1:1\n1 2:1\n", "d.svm", **opts)


def test_libsvm_huge_label_id_refused():
    too_large("labels; at most 5000", "99999999999 1:1\n1 2:1\n", "d.svm")


def test_compressed_mat_refused_from_its_header():
    # compressed zeros inflate about 1000-fold (0.8 MB became 764 MiB); refused without inflating
    content = io.BytesIO()
    scipy.io.savemat(content, {"features": np.zeros((2000, 1000)), "labels": np.zeros((2000, 3))}, do_compression=True)
    assert len(content.getvalue()) < 100_000
    msg = too_large(
        "'features' is 2000 x 1000 = 2000000 values", content.getvalue(), "z.mat", limits=DatasetLimits(max_cells=10**6)
    )
    assert "LABELSERVE_MAX_DATASET_CELLS" in msg


def test_mat_sparse_variable_checked_by_its_dense_shape():
    big = scipy.sparse.csc_matrix((4000, 3000))
    too_large(
        "'features' is 4000 x 3000",
        mat_bytes(features=big, labels=np.zeros((4000, 2))),
        "s.mat",
        limits=DatasetLimits(max_cells=1_000_000),
    )


def test_mat_other_variables_are_not_read():
    rng = np.random.default_rng(0)
    content = mat_bytes(
        features=rng.random((5, 3)), labels=rng.dirichlet(np.ones(2), size=5), junk=np.zeros((3000, 400))
    )
    ds = parse_dataset(content, filename="a.mat", limits=DatasetLimits(max_cells=1_000_000))
    assert ds.X.shape == (5, 3)


def test_sparse_arff_declaring_many_attributes_is_counted_by_its_non_zeros():
    # 512 KB of sparse ARFF that became 763 MiB (4.3 GB at peak) when expanded: now it stays
    # sparse, and the limit counts its stored values (non-zeros and the label table)
    header = (
        "@relation r\n" + "".join(f"@attribute a{j} numeric\n" for j in range(20000)) + "@attribute l {0,1}\n@data\n"
    )
    rows = "".join(f"{{{i % 20000} 1,20000 {i % 2}}}\n" for i in range(5000))
    ds = parse(header + rows, "s.arff", label_count=1)
    assert ds.X.shape == (5000, 20000) and ds.X.nnz == 5000  # row i holds a_(i mod 20000)
    msg = too_large(
        "sparse dataset would hold", header + rows, "s.arff", label_count=1, limits=DatasetLimits(max_cells=9000)
    )
    assert "non-zero feature values" in msg and "at most 9000" in msg


def test_sparse_limit_counts_non_zeros_not_cells():
    rows = "".join(f"0 {1 + i % 3000}:1\n" for i in range(3000))
    ds = parse_dataset(rows.encode(), filename="d.svm", limits=DatasetLimits(max_cells=6000))
    assert ds.X.shape == (3000, 3000) and ds.X.nnz == 3000  # 9 million cells, 6000 stored values
    too_large("3000 non-zero feature values", rows, "d.svm", limits=DatasetLimits(max_cells=5999))


def test_arff_rows_checked_while_streaming():
    # one line may not be one row each, but the rows actually read are counted too
    rows = "".join(f"{i},{i % 2}\n" for i in range(3000))
    too_large(
        "samples x 2 columns",
        f"@relation r\n@attribute x numeric\n@attribute l {{0,1}}\n@data\n{rows}",
        "r.arff",
        limits=DatasetLimits(max_cells=4000),
        label_count=1,
    )


def test_arff_too_many_labels_refused_from_the_header():
    header = "@relation 'r: -C -30'\n" + "".join(f"@attribute a{j} {{0,1}}\n" for j in range(40)) + "@data\n"
    too_large("30 labels; at most 20", header + "0," * 39 + "1\n", "r.arff", limits=DatasetLimits(max_labels=20))


def test_csv_refused_from_header_and_line_count():
    too_large(
        "100 columns; at most 60",
        ",".join(f"c{j}" for j in range(100)) + "\n",
        "d.csv",
        limits=DatasetLimits(max_features=50, max_labels=10),
        label_count=1,
    )
    rows = "1,2,0\n" * 1000
    too_large(
        "up to 1001 samples x 3 columns", "a,b,l\n" + rows, "d.csv", limits=DatasetLimits(max_cells=2000), label_count=1
    )


def test_inline_arrays_checked_by_finalize():
    with pytest.raises(DatasetTooLarge, match="10 samples x 4 columns"):
        finalize(np.zeros((10, 3)), np.zeros((10, 1)), ["a", "b", "c"], ["l"], [], limits=DatasetLimits(max_cells=39))


def test_memory_error_while_parsing_is_a_413(monkeypatch):
    from app.formats import csv_format

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(csv_format.np, "loadtxt", exhausted)
    too_large("does not fit in the memory", CSV, "d.csv", label_count=2)


@pytest.mark.parametrize("ending", ["\r", "\r\n", "\n"])
def test_csv_line_endings(ending):
    # bare CR (classic Mac) line endings used to raise csv.Error from the header reader: a 500
    ds = parse(CSV.replace("\n", ending), "d.csv", label_count=2)
    np.testing.assert_array_equal(ds.X, [[1, 2], [3, 4.5], [5, 6]])


def test_csv_unreadable_header_is_a_format_error():
    rejects("header", 'a,"b\rc",l\n1,2,0\n3,4,1\n', "d.csv", label_count=1)


def test_label_columns_deeply_nested_json_is_a_validation_error():
    # json.loads raised RecursionError (a 500) on "[[[[...]]]]"
    for text in ("[" * 100_000 + "]" * 100_000, "[" * 100_000):
        with pytest.raises(ValidationError, match="flat JSON array"):
            ParseOptions(label_columns=text)


def test_csv_header_checks_are_linear():
    # names.count per name took 20.6 s for 40,000 columns (quadratic); linear takes well under a
    # second, so the bound leaves room for a loaded machine and still catches the quadratic one
    n = 40_000
    header = ",".join(f"c{j}" for j in range(n))
    content = f"{header}\n{','.join('0' for _ in range(n))}\n{','.join('1' for _ in range(n))}\n"
    started = time.perf_counter()
    ds = parse(content, "d.csv", label_columns=[f"c{j}" for j in range(0, n, 10)])
    assert ds.n_labels == 4000 and time.perf_counter() - started < 10
    started = time.perf_counter()
    rejects("'c7' appears more than once", header + ",c7\n0\n", "d.csv", label_count=1)
    assert time.perf_counter() - started < 10


def test_mulan_xml_checks_are_linear():
    # A quadratic check of 40,000 labels is about 1.6e9 comparisons: minutes. A linear one takes a
    # second or two. The bound sits far between, so a loaded machine cannot fail a linear parser.
    n = 40_000
    xml = "<labels>" + "".join(f'<label name="l{j}"/>' for j in range(n)) + "</labels>"
    header = "@relation r\n@attribute a numeric\n" + "".join(f"@attribute l{j} {{0,1}}\n" for j in range(n))
    content = (
        header + "@data\n" + "1," + ",".join("0" for _ in range(n)) + "\n2," + ",".join("1" for _ in range(n)) + "\n"
    )
    started = time.perf_counter()
    ds = parse_dataset(
        content.encode(), filename="a.arff", labels_file=xml.encode(), limits=DatasetLimits(max_labels=n)
    )
    assert ds.n_labels == n and time.perf_counter() - started < 60
    started = time.perf_counter()
    with pytest.raises(DatasetFormatError, match="'l5' more than once"):
        parse_dataset(content.encode(), filename="a.arff", labels_file=xml.replace("l9", "l5").encode())
    assert time.perf_counter() - started < 60


@pytest.mark.parametrize("value", [1e308, -1e308, 1e16])
def test_feature_values_beyond_the_bound_rejected(value):
    # ldlkm fitted on +-1e308 predicted NaN ("null") distributions
    rows = "".join(f"{value if i == 3 else i},{i % 2}\n" for i in range(6))
    msg = rejects("within \\+-1e\\+15", "x,l\n" + rows, "d.csv", label_count=1)
    assert "data row 4" in msg


def test_limit_settings_default_to_the_parser_defaults():
    settings = Settings(_env_file=None)
    assert DatasetLimits() == DatasetLimits(
        settings.max_dataset_cells, settings.max_dataset_features, settings.max_dataset_labels
    )
