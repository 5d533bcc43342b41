"""Finds the `trellis` binary the local mode drives: an explicit path, `$TRELLIS_BIN`, the one
installed beside this package (the wheel puts it in the environment's scripts directory), then
`PATH`."""

import os
import shutil
import sysconfig
from typing import Optional

from .errors import TransportError

BINARY_ENV = "TRELLIS_BIN"


def find_binary(explicit: Optional[str] = None) -> str:
    """The path of the `trellis` executable to run."""
    if explicit:
        return explicit
    from_env = os.environ.get(BINARY_ENV)
    if from_env:
        return from_env
    name = "trellis.exe" if os.name == "nt" else "trellis"
    scripts = sysconfig.get_path("scripts")
    if scripts:
        beside = os.path.join(scripts, name)
        if os.path.isfile(beside) and os.access(beside, os.X_OK):
            return beside
    on_path = shutil.which("trellis")
    if on_path:
        return on_path
    raise TransportError(
        "client.transport",
        "no trellis binary: install the wheel (pip install trellis-workflows), put trellis on "
        "PATH, or set %s" % BINARY_ENV,
    )
