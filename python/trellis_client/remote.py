"""Remote mode: the run API of a `trellis serve` over HTTP(S) with a bearer token, using only
the standard library. Blocking calls use `urllib`; the asyncio event streams speak HTTP/1.1
on an asyncio connection, so cancelling a watch closes that connection at once. The routes
come from `routes.ROUTES` (checked against `/openapi.json`)."""

import asyncio
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Tuple

from .errors import TransportError, TrellisError, error_for
from .routes import route
from .submission import Submission
from .types import Receipt

_LINE_LIMIT = 16 * 1024 * 1024


def _problem(status: int, body: bytes) -> TrellisError:
    try:
        problem = json.loads(body.decode("utf-8"))
    except ValueError:
        problem = None
    if isinstance(problem, dict) and "code" in problem:
        return error_for(str(problem["code"]), str(problem.get("message", "")), status)
    text = body.decode("utf-8", "replace").strip() or "HTTP %d" % status
    return error_for("http.%d" % status, text, status)


class SseParser:
    """Server-Sent Events, one line at a time: unnamed events carry the items (JSON),
    `event: end` closes the stream, `event: problem` carries a failure."""

    def __init__(self) -> None:
        self.event = ""
        self.data: List[str] = []
        self.ended = False

    def feed(self, line: str) -> Optional[Dict[str, Any]]:
        """An item when `line` completes one; raises on a problem event."""
        line = line.rstrip("\r\n")
        if line == "":
            event, data = self.event, "\n".join(self.data)
            self.event, self.data = "", []
            if event == "end":
                self.ended = True
                return None
            if event == "problem":
                payload = json.loads(data) if data else {}
                raise error_for(str(payload.get("code", "stream.problem")),
                                str(payload.get("message", data)))
            if event == "" and data:
                return json.loads(data)
            return None
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            self.event = value
        elif field == "data":
            self.data.append(value)
        return None


class RemoteSettings:
    """Where the server is and how to authenticate."""

    def __init__(self, url: str, token: Optional[str], timeout: float, ssl_context: Optional[ssl.SSLContext]):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.ssl_context = ssl_context

    def headers(self, accept: str = "application/json") -> Dict[str, str]:
        headers = {"Accept": accept}
        if self.token:
            headers["Authorization"] = "Bearer %s" % self.token
        return headers

    def address(self, path: str, query: Optional[Dict[str, Any]] = None) -> str:
        pairs = {k: str(v) for k, v in (query or {}).items() if v is not None}
        return self.url + path + ("?" + urllib.parse.urlencode(pairs) if pairs else "")


def _follow_route(verb: str, run_id: str, after: Optional[str]) -> Tuple[str, Dict[str, Any]]:
    _, path = route(verb, run=urllib.parse.quote(run_id, safe=""))
    return path, {"after": after}


def _receipt(answer: Dict[str, Any]) -> Receipt:
    return Receipt(run_id=answer["runId"], created=answer.get("created"))


def _resume_body(from_checkpoint: Optional[int], force: bool) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if from_checkpoint is not None:
        body["fromCheckpoint"] = from_checkpoint
    if force:
        body["force"] = True
    return body


class RemoteTransport:
    """The blocking remote transport."""

    def __init__(self, settings: RemoteSettings):
        self.settings = settings

    def _open(self, method: str, path: str, query: Optional[Dict[str, Any]] = None,
              body: Optional[Any] = None, accept: str = "application/json",
              timeout: Optional[float] = None) -> Any:
        data = None
        headers = self.settings.headers(accept)
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(
            self.settings.address(path, query), data=data, headers=headers, method=method)
        try:
            return urllib.request.urlopen(
                request, timeout=timeout, context=self.settings.ssl_context)
        except urllib.error.HTTPError as error:
            raise _problem(error.code, error.read())
        except (urllib.error.URLError, OSError) as error:
            raise TransportError("client.transport", "cannot reach %s: %s" % (self.settings.url, error))

    def _json(self, name: str, run_id: Optional[str] = None, query: Optional[Dict[str, Any]] = None,
              body: Optional[Any] = None) -> Any:
        params = {"run": urllib.parse.quote(run_id, safe="")} if run_id is not None else {}
        method, path = route(name, **params)
        with self._open(method, path, query, body, timeout=self.settings.timeout) as answer:
            return json.loads(answer.read().decode("utf-8"))

    def submit(self, submission: Submission) -> Receipt:
        return _receipt(self._json("submit", body=submission.request_body()))

    def status(self, run_id: str) -> Dict[str, Any]:
        return self._json("status", run_id)

    def list_runs(self, limit: int) -> Dict[str, Any]:
        return self._json("list", query={"limit": limit})

    def force_stop(self, run_id: str) -> Dict[str, Any]:
        return self._json("force_stop", run_id, body={})

    def resume(self, run_id: str, from_checkpoint: Optional[int], force: bool) -> Receipt:
        return _receipt(self._json("resume", run_id, body=_resume_body(from_checkpoint, force)))

    def checkpoints(self, run_id: str, after: Optional[int], limit: Optional[int]) -> Dict[str, Any]:
        return self._json("checkpoints", run_id, query={"after": after, "limit": limit})

    def follow(self, verb: str, run_id: str, after: Optional[str]) -> Iterator[Dict[str, Any]]:
        path, query = _follow_route(verb, run_id, after)
        # No read timeout: a quiet run sends nothing for as long as its steps take.
        answer = self._open("GET", path, query, accept="text/event-stream")
        parser = SseParser()
        try:
            for raw in answer:
                item = parser.feed(raw.decode("utf-8"))
                if item is not None:
                    yield item
                if parser.ended:
                    return
        finally:
            # Closing the iterator closes this connection only; the run goes on.
            answer.close()


class AsyncRemoteTransport:
    """The asyncio remote transport: JSON calls run the blocking ones on a worker thread
    (a cancelled await just stops waiting for the answer); streams use asyncio sockets."""

    def __init__(self, settings: RemoteSettings):
        self.settings = settings
        self.blocking = RemoteTransport(settings)

    async def _thread(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, function, *args)

    async def submit(self, submission: Submission) -> Receipt:
        return await self._thread(self.blocking.submit, submission)

    async def status(self, run_id: str) -> Dict[str, Any]:
        return await self._thread(self.blocking.status, run_id)

    async def list_runs(self, limit: int) -> Dict[str, Any]:
        return await self._thread(self.blocking.list_runs, limit)

    async def force_stop(self, run_id: str) -> Dict[str, Any]:
        return await self._thread(self.blocking.force_stop, run_id)

    async def resume(self, run_id: str, from_checkpoint: Optional[int], force: bool) -> Receipt:
        return await self._thread(self.blocking.resume, run_id, from_checkpoint, force)

    async def checkpoints(self, run_id: str, after: Optional[int], limit: Optional[int]) -> Dict[str, Any]:
        return await self._thread(self.blocking.checkpoints, run_id, after, limit)

    async def follow(self, verb: str, run_id: str, after: Optional[str]) -> AsyncIterator[Dict[str, Any]]:
        path, query = _follow_route(verb, run_id, after)
        address = urllib.parse.urlsplit(self.settings.address(path, query))
        secure = address.scheme == "https"
        context = self.settings.ssl_context or (ssl.create_default_context() if secure else None)
        try:
            reader, writer = await asyncio.open_connection(
                address.hostname, address.port or (443 if secure else 80),
                ssl=context if secure else None, limit=_LINE_LIMIT)
        except OSError as error:
            raise TransportError("client.transport", "cannot reach %s: %s" % (self.settings.url, error))
        try:
            target = address.path + ("?" + address.query if address.query else "")
            head = ["GET %s HTTP/1.1" % target, "Host: %s" % address.netloc, "Connection: close"]
            head += ["%s: %s" % pair for pair in self.settings.headers("text/event-stream").items()]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            await writer.drain()
            status, headers = await _read_head(reader)
            lines = _body_lines(reader, headers)
            if status >= 400:
                body = b"".join([line async for line in lines])
                raise _problem(status, body)
            parser = SseParser()
            async for raw in lines:
                item = parser.feed(raw.decode("utf-8"))
                if item is not None:
                    yield item
                if parser.ended:
                    return
        finally:
            # A cancelled task or a closed iterator closes this connection only.
            writer.close()


async def _read_head(reader: asyncio.StreamReader) -> Tuple[int, Dict[str, str]]:
    status_line = (await reader.readline()).decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise TransportError("client.transport", "not an HTTP answer: %r" % status_line[:80])
    headers: Dict[str, str] = {}
    while True:
        line = (await reader.readline()).decode("latin-1").rstrip("\r\n")
        if not line:
            break
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def _body_lines(reader: asyncio.StreamReader, headers: Dict[str, str]) -> AsyncIterator[bytes]:
    """The body's lines, undoing chunked transfer coding."""
    if "chunked" not in headers.get("transfer-encoding", "").lower():
        if "content-length" in headers:
            yield await reader.readexactly(int(headers["content-length"]))
            return
        while True:
            line = await reader.readline()
            if not line:
                return
            yield line
    pending = b""
    while True:
        size_line = await reader.readline()
        if not size_line:
            break
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            break
        pending += await reader.readexactly(size)
        await reader.readexactly(2)
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line + b"\n"
    if pending:
        yield pending
