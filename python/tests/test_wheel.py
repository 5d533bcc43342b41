"""The installed wheel (scripts/test-python sets TRELLIS_WHEEL_TEST=1): no Rust toolchain on
PATH, the `trellis` command comes from the wheel, its version is the distribution's, and the
client's local mode finds it without being told where it is."""

import importlib.metadata
import os
import shutil
import subprocess
import sysconfig

import pytest

from trellis_client import Client
from trellis_client.binary import find_binary

pytestmark = pytest.mark.skipif(
    os.environ.get("TRELLIS_WHEEL_TEST") != "1",
    reason="runs inside the wheel's venv (scripts/test-python)")


def test_the_wheel_installs_the_trellis_command():
    assert shutil.which("cargo") is None and shutil.which("rustc") is None
    assert "TRELLIS_BIN" not in os.environ or os.environ["TRELLIS_BIN"] == find_binary()
    installed = os.path.join(sysconfig.get_path("scripts"), "trellis")
    assert find_binary(None) == installed
    assert shutil.which("trellis") == installed
    version = subprocess.run([installed, "--version"], capture_output=True, text=True,
                             check=True).stdout.split()
    assert version == ["trellis", importlib.metadata.version("trellis-workflows")]


def test_local_mode_finds_the_installed_binary(tmp_path):
    client = Client(home=str(tmp_path / "home"))
    assert client._transport.commands.binary == os.path.join(  # type: ignore[union-attr]
        sysconfig.get_path("scripts"), "trellis")
