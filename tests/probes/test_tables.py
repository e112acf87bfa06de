"""probes/tables.py: one way to write a number as a table cell and to align columns, in both packages."""

import math

import numpy as np
import pytest

from probes.tables import NA, UNDEFINED, align_columns, format_cell, format_score


@pytest.mark.parametrize(("value", "signed", "expected"), [
    pytest.param(0.98765, False, "0.988", id="rounds-to-3"),
    pytest.param(0.5, True, "+0.500", id="signed-positive"),
    pytest.param(-0.25, True, "-0.250", id="signed-negative"),
    pytest.param(np.float32(0.125), False, "0.125", id="numpy-float"),
    pytest.param(1, False, "1.000", id="integer-score"),
    pytest.param(None, False, "n/a", id="not-computed"),
    pytest.param(math.nan, True, "–", id="undefined"),
    pytest.param(math.inf, False, "–", id="infinite"),
])
def test_format_score(value, signed, expected):
    assert format_score(value, signed) == expected


@pytest.mark.parametrize(("value", "expected"), [
    pytest.param(0.123456, "0.1235", id="float-4-significant"),
    pytest.param(np.float64(12345.6), "1.235e+04", id="numpy-float"),
    pytest.param(20000, "20000", id="integer-as-is"),
    pytest.param(np.int64(7), "7", id="numpy-integer-as-is"),
    pytest.param(True, "True", id="bool-as-is"),
    pytest.param("hyla", "hyla", id="string"),
    pytest.param(None, NA, id="none"),
    pytest.param(float("nan"), UNDEFINED, id="nan"),
])
def test_format_cell(value, expected):
    assert format_cell(value) == expected


def test_format_cell_takes_a_format_spec():
    assert format_cell(2 / 3, ".2f") == "0.67"


def test_align_columns_pads_to_the_widest_cell_and_drops_trailing_spaces():
    rows = [["variant", "ood", "note"], ["softmax", "0.5", ""], ["hyla", "0.75", "dead layer 1"]]
    assert align_columns(rows) == [
        "variant  ood   note",
        "softmax  0.5",
        "hyla     0.75  dead layer 1",
    ]
    assert align_columns(rows, right=True) == [
        "variant   ood          note",
        "softmax   0.5",
        "hyla     0.75  dead layer 1",
    ]
    assert align_columns([]) == []


def test_align_columns_refuses_ragged_rows():
    with pytest.raises(ValueError, match=r"different numbers of cells \(\[1, 2\]\)"):
        align_columns([["a", "b"], ["c"]])
