"""Typed errors carrying the run API's stable problem codes (`{"code", "message"}`)."""

from typing import Dict, Optional, Type


class TrellisError(Exception):
    """A refusal from Trellis: `code` is the run API's stable code (`run.not_found`,
    `admission.invalid_graph`, …), `message` its human text, `status` the HTTP status when the
    answer came from a server."""

    def __init__(self, code: str, message: str, status: Optional[int] = None):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.status = status


class RunNotFound(TrellisError):
    """No run has this id (`run.not_found`)."""


class InvalidRequest(TrellisError):
    """The request was malformed (`run.invalid_id`, `cursor.*`, `request.*`, `query.*`)."""


class AdmissionRefused(TrellisError):
    """The graph, input or plan cannot run (`admission.*`, `run.preflight`)."""


class Conflict(TrellisError):
    """The run is not in a state that allows this (`run.still_active`,
    `run.nothing_to_resume`, `run.already_resumed`, `run.workspace_changed`, …)."""


class Unauthorized(TrellisError):
    """The server refused the token (HTTP 401/403)."""


class Unavailable(TrellisError):
    """The server is busy or the ledger locked (`ledger.busy`, `too_many_streams`)."""


class TransportError(TrellisError):
    """The binary could not be started, or the server could not be reached
    (`client.transport`)."""


_EXACT: Dict[str, Type[TrellisError]] = {
    "run.not_found": RunNotFound,
    "run.unknown_execution": RunNotFound,
    "run.unknown_checkpoint": RunNotFound,
    "run.preflight": AdmissionRefused,
    "ledger.busy": Unavailable,
    "too_many_streams": Unavailable,
    "client.transport": TransportError,
}

_PREFIXES = (
    ("admission.", AdmissionRefused),
    ("source.", AdmissionRefused),
    ("request.", InvalidRequest),
    ("query.", InvalidRequest),
    ("cursor.", InvalidRequest),
    ("run.invalid_id", InvalidRequest),
    ("auth.", Unauthorized),
    ("run.", Conflict),
    ("submission.", Conflict),
)


def error_for(code: str, message: str, status: Optional[int] = None) -> TrellisError:
    """The typed error for a problem code (`TrellisError` itself for a code with no class)."""
    kind = _EXACT.get(code)
    if kind is None:
        for prefix, candidate in _PREFIXES:
            if code.startswith(prefix):
                kind = candidate
                break
    if kind is None and status in (401, 403):
        kind = Unauthorized
    return (kind or TrellisError)(code, message, status)
