"""`Client` (blocking) and `AsyncClient` (asyncio): submit, observe and control Trellis runs,
locally through the `trellis` binary or remotely through a `trellis serve` (url + token).
Observing never owns a run: closing an iterator or cancelling an await only detaches."""

import ssl
from typing import AsyncIterator, Dict, Iterator, Optional, Union

from .local import AsyncLocalTransport, LocalCommands, LocalTransport
from .remote import AsyncRemoteTransport, RemoteSettings, RemoteTransport
from .submission import PathOrDocument, Submission
from .types import (CheckpointPage, LogEntry, Receipt, RunListing, RunStatus, RunSummary,
                    WatchUpdate, is_finished)


def _settings(url: str, token: Optional[str], timeout: float,
              ssl_context: Optional[ssl.SSLContext]) -> RemoteSettings:
    return RemoteSettings(url, token, timeout, ssl_context)


class Client:
    """Blocking client. `Client()` drives the local `trellis` binary (found on `PATH`, in
    `$TRELLIS_BIN` or beside this package); `Client(url=…, token=…)` talks to a team server."""

    def __init__(
        self,
        url: Optional[str] = None,
        token: Optional[str] = None,
        *,
        binary: Optional[str] = None,
        home: Optional[str] = None,
        ledger: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        timeout: float = 60.0,
        ssl_context: Optional[ssl.SSLContext] = None,
    ):
        self._transport: Union[LocalTransport, RemoteTransport]
        if url is None:
            self._transport = LocalTransport(LocalCommands(binary, home, ledger, env))
        else:
            self._transport = RemoteTransport(_settings(url, token, timeout, ssl_context))

    @property
    def remote(self) -> bool:
        return isinstance(self._transport, RemoteTransport)

    def run(
        self,
        *,
        template: Optional[str] = None,
        graph: Optional[PathOrDocument] = None,
        profile: Optional[str] = None,
        task: Optional[str] = None,
        input: Optional[PathOrDocument] = None,
        plan: Optional[PathOrDocument] = None,
        uniform: Optional[PathOrDocument] = None,
        workspace: Optional[str] = None,
        title: Optional[str] = None,
        submission_key: Optional[str] = None,
        delivery: Optional[str] = None,
        no_preflight: bool = False,
    ) -> Receipt:
        """Starts a run of a template, a graph (a file or a document) or a profile, detached,
        and returns its receipt. `plan` is an exact runtime plan, `uniform` one binding for
        every executable; `workspace` is a directory locally, a name under the server's
        workspace root remotely."""
        return self._transport.submit(Submission(
            template, graph, profile, task, input, plan, uniform, workspace, title,
            submission_key, delivery, no_preflight))

    def status(self, run_id: str) -> RunStatus:
        """The run with every execution (`RunStatus`)."""
        return self._transport.status(run_id)  # type: ignore[return-value]

    def list_runs(self, limit: int = 50) -> RunListing:
        """The newest runs first (`{"runs": [RunSummary], "skipped"?: […]}`)."""
        return self._transport.list_runs(limit)  # type: ignore[return-value]

    def watch(self, run_id: str, after: Optional[str] = None) -> Iterator[WatchUpdate]:
        """Every event of the run after `after` (a cursor) until it finishes; the last one has
        `status.phase == "finished"`. Closing the iterator early only detaches."""
        return self._transport.follow("watch", run_id, after)  # type: ignore[return-value]

    def logs(self, run_id: str, after: Optional[str] = None) -> Iterator[LogEntry]:
        """The run's log lines after `after`, following until the run ends."""
        return self._transport.follow("logs", run_id, after)  # type: ignore[return-value]

    def wait(self, run_id: str) -> RunStatus:
        """Watches the run to its end and returns its final status."""
        for update in self.watch(run_id):
            if is_finished(update.get("status")):
                break
        return self.status(run_id)

    def force_stop(self, run_id: str) -> RunSummary:
        """Stops the run now: its workers are killed and it ends `force_stopped`."""
        return self._transport.force_stop(run_id)  # type: ignore[return-value]

    def resume(self, run_id: str, from_checkpoint: Optional[int] = None, force: bool = False) -> Receipt:
        """Starts a successor of a failed run that reuses every settled outcome."""
        return self._transport.resume(run_id, from_checkpoint, force)

    def checkpoints(self, run_id: str, after: Optional[int] = None, limit: Optional[int] = None) -> CheckpointPage:
        """The run's workspace checkpoints, oldest first."""
        return self._transport.checkpoints(run_id, after, limit)  # type: ignore[return-value]


class AsyncClient:
    """The asyncio client, with the same constructor and methods as `Client`; `watch` and
    `logs` are async iterators. Cancelling a task awaiting any of them never stops the run."""

    def __init__(
        self,
        url: Optional[str] = None,
        token: Optional[str] = None,
        *,
        binary: Optional[str] = None,
        home: Optional[str] = None,
        ledger: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        timeout: float = 60.0,
        ssl_context: Optional[ssl.SSLContext] = None,
    ):
        self._transport: Union[AsyncLocalTransport, AsyncRemoteTransport]
        if url is None:
            self._transport = AsyncLocalTransport(LocalCommands(binary, home, ledger, env))
        else:
            self._transport = AsyncRemoteTransport(_settings(url, token, timeout, ssl_context))

    async def run(
        self,
        *,
        template: Optional[str] = None,
        graph: Optional[PathOrDocument] = None,
        profile: Optional[str] = None,
        task: Optional[str] = None,
        input: Optional[PathOrDocument] = None,
        plan: Optional[PathOrDocument] = None,
        uniform: Optional[PathOrDocument] = None,
        workspace: Optional[str] = None,
        title: Optional[str] = None,
        submission_key: Optional[str] = None,
        delivery: Optional[str] = None,
        no_preflight: bool = False,
    ) -> Receipt:
        """See `Client.run`."""
        return await self._transport.submit(Submission(
            template, graph, profile, task, input, plan, uniform, workspace, title,
            submission_key, delivery, no_preflight))

    async def status(self, run_id: str) -> RunStatus:
        return await self._transport.status(run_id)  # type: ignore[return-value]

    async def list_runs(self, limit: int = 50) -> RunListing:
        return await self._transport.list_runs(limit)  # type: ignore[return-value]

    def watch(self, run_id: str, after: Optional[str] = None) -> AsyncIterator[WatchUpdate]:
        return self._transport.follow("watch", run_id, after)  # type: ignore[return-value]

    def logs(self, run_id: str, after: Optional[str] = None) -> AsyncIterator[LogEntry]:
        return self._transport.follow("logs", run_id, after)  # type: ignore[return-value]

    async def wait(self, run_id: str) -> RunStatus:
        stream = self.watch(run_id)
        try:
            async for update in stream:
                if is_finished(update.get("status")):
                    break
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        return await self.status(run_id)

    async def force_stop(self, run_id: str) -> RunSummary:
        return await self._transport.force_stop(run_id)  # type: ignore[return-value]

    async def resume(self, run_id: str, from_checkpoint: Optional[int] = None, force: bool = False) -> Receipt:
        return await self._transport.resume(run_id, from_checkpoint, force)

    async def checkpoints(self, run_id: str, after: Optional[int] = None,
                          limit: Optional[int] = None) -> CheckpointPage:
        return await self._transport.checkpoints(run_id, after, limit)  # type: ignore[return-value]


__all__ = ["Client", "AsyncClient"]
