"""A client reads the service's words, never a library's exception text: an evaluation that fails
in a library says what failed and leaves the library's text to the log."""

from __future__ import annotations

import numpy as np
import pytest

from app.errors import raised_by_the_service
from app.methods.ldlkm import _order as minkowski_order
from app.services.evaluation import unscorable


def test_an_evaluation_failing_in_a_library_is_worded_by_the_service():
    with pytest.raises(ValueError) as library:
        np.asarray(["x"]).astype(float)  # "could not convert string to float: 'x'"
    assert not raised_by_the_service(library.value)
    message = unscorable(library.value)
    assert "could not convert" not in message and "cannot be scored" in message
    with pytest.raises(ValueError) as own:
        minkowski_order("x")
    assert raised_by_the_service(own.value) and unscorable(own.value) == str(own.value)
