"""``app.runtime.allocator``: freed NumPy temporaries are reused instead of faulted in again."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a Python subprocess

ROOT = Path(__file__).resolve().parents[2]
# minor page faults of 20 batch predictions' worth (after a first one) of NumPy temporaries, in the blocks of
# ``ExactKNN`` (scaled queries, distances, selection) for scene's test split against its
# training split, after the settings or without them
SCRIPT = """
import resource, sys
import numpy as np
from app.runtime.allocator import keep_freed_memory
if sys.argv[1] == "kept":
    assert keep_freed_memory()
rng = np.random.default_rng(0)
X, T = rng.random((1196, 294)), rng.random((1211, 294))


def predict():
    for a in range(0, 1196, 216):
        D = ((X[a : a + 216] - 0.5) / 3.0) @ T.T
        D += 1.0
        np.argpartition(D, 10, axis=1)


predict()  # the first one faults its memory in either way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    predict()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the settings are glibc's")
def test_freed_temporaries_are_reused_rather_than_faulted_in_again() -> None:
    faults = {}
    for mode in ("default", "kept"):
        out = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, capture_output=True, text=True, check=True)
        faults[mode] = int(out.stdout)
    block = 216 * 1211 * 8 // 4096  # pages of one block of distances
    if faults["default"] <= 5 * block:
        # the control: without the settings the blocks must be given back and faulted in again;
        # NumPy 1.26 (the floor) reuses them itself here, and then there is nothing to tell apart
        pytest.skip(f"this NumPy reuses freed blocks without the settings ({faults['default']} faults)")
    assert faults["kept"] < block  # reused


LOADING = """
import numpy as np
from app.runtime.allocator import keep_freed_memory, large_blocks_mapped


def resident():
    return int(open("/proc/self/statm").read().split()[1]) * 4096


def held_after_free():
    before = resident()
    block = np.ones(1 << 20)  # 8 MiB, written
    del block
    return resident() - before


assert keep_freed_memory()
with large_blocks_mapped():
    with large_blocks_mapped():
        pass
    nested = held_after_free()  # the inner load's end did not restore the setting
outside = held_after_free()
print(nested, outside)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the settings are glibc's")
def test_blocks_freed_while_a_model_loads_go_back_to_the_system() -> None:
    out = subprocess.run([sys.executable, "-c", LOADING], cwd=ROOT, capture_output=True, text=True, check=True)
    nested, outside = (int(v) for v in out.stdout.split())
    assert nested < 1 << 20  # unmapped when freed
    assert outside > 6 << 20  # kept for reuse, as the settings say, once no load runs
