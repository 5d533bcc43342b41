"""Finds the trellis binary and the conformance vectors, and sets up what the client tests
share: a private state directory, the offline software-change workspace (command bindings
from examples/offline) and a `trellis serve` on loopback."""

import json
import os
import pathlib
import secrets
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
OFFLINE = REPO / "examples" / "offline"


def _binary():
    """$TRELLIS_BIN, else the trellis the wheel installed into this environment."""
    explicit = os.environ.get("TRELLIS_BIN")
    if explicit:
        return explicit
    from trellis_client.binary import find_binary
    from trellis_client.errors import TransportError
    try:
        return find_binary()
    except TransportError:
        return str(REPO / "target" / "debug" / "trellis")


@pytest.fixture(scope="session")
def trellis_bin():
    candidate = _binary()
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


@pytest.fixture
def home(tmp_path):
    """A private $TRELLIS_HOME."""
    path = tmp_path / "home"
    path.mkdir()
    return str(path)


def offline_plan():
    """The offline walk-through's plan (README) with absolute paths, so it also runs in a
    workspace the server creates: a worker writing greeting.txt, two reviewers that reject the
    first attempt (one repair round)."""
    python = sys.executable
    return {"nodes": {
        "worker": {"kind": "command", "command": [python, str(OFFLINE / "worker.py")]},
        "acceptance": {"kind": "command",
                       "command": [python, str(OFFLINE / "review.py"), "acceptance"]},
        "code": {"kind": "command", "command": [python, str(OFFLINE / "review.py"), "code"]},
    }}


@pytest.fixture
def workspace(tmp_path):
    """An empty git repository for a local software-change run."""
    path = tmp_path / "workspace"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return str(path)


class Server:
    def __init__(self, process, url, token, workspaces):
        self.process = process
        self.url = url
        self.token = token
        self.workspaces = workspaces


@pytest.fixture
def server(trellis_bin, home, tmp_path):
    """`trellis serve` on an ephemeral loopback port with a fresh bearer token."""
    token = secrets.token_hex(16)
    workspaces = tmp_path / "served"
    env = dict(os.environ, TRELLIS_HOME=home, TEAM_TOKEN=token)
    env.pop("TRELLIS_DISPATCH", None)
    process = subprocess.Popen(
        # The stand-in worker's script lies outside the served workspace, which serve's default
        # sandbox does not show (containment has its own tests).
        [trellis_bin, "serve", "--listen", "127.0.0.1:0", "--token-env", "TEAM_TOKEN",
         "--workspaces", str(workspaces), "--isolation", "none"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True)
    try:
        first = json.loads(process.stdout.readline())
        yield Server(process, "http://%s" % first["listening"], token, workspaces)
    finally:
        process.kill()
        process.wait()
        process.stdout.close()

