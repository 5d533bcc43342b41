"""Submit, watch and control Trellis runs from Python, locally (the `trellis` binary's JSON
outputs) or against a team server (`trellis serve`, url + bearer token)."""

from .client import AsyncClient, Client
from .errors import (AdmissionRefused, Conflict, InvalidRequest, RunNotFound, TransportError,
                     TrellisError, Unauthorized, Unavailable, error_for)
from .routes import ROUTES
from .types import (CheckpointInfo, CheckpointPage, ExecutionSummary, LogEntry, PhaseStatus,
                    Receipt, RunListing, RunStatus, RunSummary, TokenUsage, WatchUpdate, is_finished)

__all__ = [
    "AdmissionRefused", "AsyncClient", "CheckpointInfo", "CheckpointPage", "Client", "Conflict",
    "ExecutionSummary", "InvalidRequest", "LogEntry", "PhaseStatus", "ROUTES", "Receipt",
    "RunListing", "RunNotFound", "RunStatus", "RunSummary", "TokenUsage", "TransportError", "TrellisError",
    "Unauthorized", "Unavailable", "WatchUpdate", "error_for", "is_finished",
]
