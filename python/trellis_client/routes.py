"""Every route of the run API the remote client calls, with its method: the one table the
remote transport builds its requests from, checked against `/openapi.json` by the tests."""

from typing import Dict, Tuple

API_PREFIX = "/api/v1"

ROUTES: Dict[str, Tuple[str, str]] = {
    "submit": ("POST", "/runs"),
    "list": ("GET", "/runs"),
    "status": ("GET", "/runs/{run}"),
    "watch": ("GET", "/runs/{run}/watch"),
    "logs": ("GET", "/runs/{run}/logs"),
    "force_stop": ("POST", "/runs/{run}/force-stop"),
    "resume": ("POST", "/runs/{run}/resume"),
    "checkpoints": ("GET", "/runs/{run}/checkpoints"),
}


def route(name: str, **params: str) -> Tuple[str, str]:
    """The method and the full path (under `/api/v1`) of a named route."""
    method, template = ROUTES[name]
    return method, API_PREFIX + template.format(**params)
