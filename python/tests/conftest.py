"""Finds the trellis binary and the conformance vectors for the builder tests."""

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def trellis_bin():
    candidate = os.environ.get("TRELLIS_BIN") or str(REPO / "target" / "debug" / "trellis")
    if not os.path.isfile(candidate):
        if os.environ.get("CI"):
            pytest.fail("trellis binary %s is missing (CI is set)" % candidate)
        pytest.skip("build the trellis binary first (cargo build -p trellis-cli)")
    os.environ["TRELLIS_BIN"] = candidate
    return candidate


@pytest.fixture(scope="session")
def gap_conformance():
    root = os.environ.get("TRELLIS_CONFORMANCE_DIR") or str(REPO.parent / "shared" / "conformance")
    directory = pathlib.Path(root) / "gap"
    if not directory.is_dir():
        if os.environ.get("CI"):
            pytest.fail("conformance directory %s is missing (CI is set)" % directory)
        pytest.skip("conformance directory %s not found" % directory)
    return directory
