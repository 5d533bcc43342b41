"""The run API's JSON shapes as typed dictionaries (`docs/run-api.md`, `/openapi.json`), and
the receipt of a submission."""

import dataclasses
import sys
from typing import Any, Dict, List, Optional

if sys.version_info >= (3, 8):
    from typing import TypedDict
else:  # pragma: no cover
    from typing_extensions import TypedDict


class TokenUsage(TypedDict, total=False):
    inputTokens: int
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int


class PhaseStatus(TypedDict, total=False):
    """`{"phase": "admitted" | "running" | "stopping" | "finished", "activeExecutions"?,
    "terminalResult"?: {"status": "succeeded", "output"} | {"status": "failed", "reason"}}`."""

    phase: str
    activeExecutions: List[Dict[str, Any]]
    terminalResult: Dict[str, Any]


class ExecutionSummary(TypedDict, total=False):
    id: int
    reference: str
    node: str
    mapIndices: List[int]
    attempt: int
    worker: str
    phase: str
    outcome: Dict[str, Any]
    startedAtMs: int
    endedAtMs: int
    tokenUsage: TokenUsage
    reusedFrom: str
    settledBy: str
    voidReason: str


class RunSummary(TypedDict, total=False):
    runId: str
    title: str
    kind: str
    template: str
    graphIdentity: str
    atCursor: str
    status: PhaseStatus
    createdAtMs: int
    startedAtMs: int
    finishedAtMs: int
    tokenUsage: TokenUsage
    predecessor: str
    successor: str
    worktree: Dict[str, Any]


class RunStatus(RunSummary, total=False):
    forceStopRequested: bool
    executionsStarted: int
    controller: Dict[str, Any]
    executions: List[ExecutionSummary]
    cause: Dict[str, Any]


class RunListing(TypedDict, total=False):
    """Runs newest first; `skipped` names runs whose stored rows cannot be read."""

    runs: List[RunSummary]
    skipped: List[Dict[str, str]]


class WatchUpdate(TypedDict, total=False):
    """One event of a run: `event` is the ledger event's kind (`node_started`, `terminal`, …);
    the last one of a run has `status.phase == "finished"`."""

    runId: str
    title: str
    cursor: str
    event: str
    atMs: int
    status: PhaseStatus
    counts: Dict[str, int]
    execution: ExecutionSummary


class LogRecord(TypedDict, total=False):
    level: str
    target: str
    message: str


class LogEntry(TypedDict, total=False):
    runId: str
    cursor: str
    execution: str
    executionId: int
    node: str
    stream: str
    record: LogRecord
    atMs: int


class CheckpointInfo(TypedDict, total=False):
    id: int
    before: Dict[str, str]
    takenAtMs: int
    filesChanged: int
    bytesChanged: int
    commit: str
    tree: str
    reference: str
    nextExecution: int
    kept: bool


class CheckpointPage(TypedDict, total=False):
    runId: str
    checkpoints: List[CheckpointInfo]
    nextAfter: int


@dataclasses.dataclass(frozen=True)
class Receipt:
    """A submitted run: its id, and whether this submission created it (`False`: the
    submission key already named this run; `None`: the local binary does not say)."""

    run_id: str
    created: Optional[bool] = None


def is_finished(status: Optional[PhaseStatus]) -> bool:
    """Whether a phase status is the run's last."""
    return bool(status) and status.get("phase") == "finished"
