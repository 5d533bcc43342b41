"""Local mode: drives the `trellis` binary's JSON outputs on this host's state directory.
Observers (`watch`, `logs`) are child processes of their own; closing an iterator or
cancelling an await ends only that observer, never the run (its controller is detached)."""

import asyncio
import json
import os
import subprocess
import tempfile
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Tuple

from .binary import find_binary
from .errors import AdmissionRefused, TrellisError, TransportError, error_for
from .submission import Submission, scratch_directory
from .types import Receipt

# The binary prints its errors as one JSON line (`{"code", "message"}`) with this set.
_ERROR_FORMAT = {"TRELLIS_ERROR_FORMAT": "json"}


class LocalCommands:
    """How each operation maps to a `trellis` command line and its environment."""

    def __init__(
        self,
        binary: Optional[str] = None,
        home: Optional[str] = None,
        ledger: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
    ):
        self.binary = find_binary(binary)
        self.home = home
        self.ledger = ledger
        self.extra_env = dict(env or {})

    def command(self, args: List[str]) -> List[str]:
        prefix = [self.binary]
        if self.ledger:
            prefix += ["--ledger", self.ledger]
        return prefix + args

    def environment(self) -> Dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        if self.home:
            env["TRELLIS_HOME"] = os.fspath(self.home)
        env.update(_ERROR_FORMAT)
        return env


def _failure(code: int, stdout: str, stderr: str) -> TrellisError:
    """The typed error of a failed command, from its JSON error line when it printed one."""
    for line in reversed(stderr.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                problem = json.loads(line)
            except ValueError:
                continue
            if isinstance(problem, dict) and "code" in problem:
                return error_for(str(problem["code"]), str(problem.get("message", "")))
    first = stdout.strip().splitlines()[0] if stdout.strip() else ""
    if first.startswith("{"):
        try:
            report = json.loads(first)
        except ValueError:
            report = None
        if isinstance(report, dict) and report.get("status") == "rejected":
            error = AdmissionRefused(
                "admission.graph_rejected", stderr.strip() or "the graph was rejected")
            error.diagnostics = report.get("diagnostics", [])  # type: ignore[attr-defined]
            return error
    text = stderr.strip() or "trellis exited with status %d" % code
    if code == 2:
        kind = "run.preflight" if "preflight" in text else "admission.preparation"
        return error_for(kind, text)
    return error_for("cli.error", text)


def _json_lines(text: str) -> List[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _receipt(stdout: str) -> Receipt:
    lines = _json_lines(stdout)
    if not lines or "runId" not in lines[0]:
        raise TransportError("client.transport", "trellis printed no receipt: %r" % stdout[:200])
    return Receipt(run_id=lines[0]["runId"])


def _resume_args(run_id: str, from_checkpoint: Optional[int], force: bool) -> List[str]:
    args = ["resume", run_id, "--json", "--detach"]
    if from_checkpoint is not None:
        args += ["--from-checkpoint", str(from_checkpoint)]
    if force:
        args.append("--force")
    return args


def _checkpoint_args(run_id: str, after: Optional[int], limit: Optional[int]) -> List[str]:
    args = ["checkpoints", run_id, "--json"]
    if after is not None:
        args += ["--after", str(after)]
    if limit is not None:
        args += ["--limit", str(limit)]
    return args


def _follow_args(verb: str, run_id: str, after: Optional[str]) -> List[str]:
    args = [verb, run_id]
    if verb == "watch":
        args.append("--json")
    if after is not None:
        args += ["--after", after]
    return args


class LocalTransport:
    """The blocking local transport."""

    def __init__(self, commands: LocalCommands):
        self.commands = commands

    def _call(self, args: List[str]) -> Tuple[str, str]:
        try:
            done = subprocess.run(
                self.commands.command(args), env=self.commands.environment(),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, check=False)
        except OSError as error:
            raise TransportError("client.transport", "cannot start trellis: %s" % error)
        if done.returncode != 0:
            raise _failure(done.returncode, done.stdout, done.stderr)
        return done.stdout, done.stderr

    def _one(self, args: List[str]) -> Any:
        stdout, _ = self._call(args)
        return json.loads(stdout)

    def submit(self, submission: Submission) -> Receipt:
        with scratch_directory() as scratch:
            stdout, _ = self._call(submission.cli_arguments(scratch))
        return _receipt(stdout)

    def status(self, run_id: str) -> Dict[str, Any]:
        return self._one(["status", run_id, "--json"])

    def list_runs(self, limit: int) -> Dict[str, Any]:
        return self._one(["list", "--json", "--limit", str(limit)])

    def force_stop(self, run_id: str) -> Dict[str, Any]:
        return self._one(["force-stop", run_id])

    def resume(self, run_id: str, from_checkpoint: Optional[int], force: bool) -> Receipt:
        stdout, _ = self._call(_resume_args(run_id, from_checkpoint, force))
        return _receipt(stdout)

    def checkpoints(self, run_id: str, after: Optional[int], limit: Optional[int]) -> Dict[str, Any]:
        return self._one(_checkpoint_args(run_id, after, limit))

    def follow(self, verb: str, run_id: str, after: Optional[str]) -> Iterator[Dict[str, Any]]:
        # stderr goes to a file: a full pipe nobody reads would stall the observer.
        errors = tempfile.TemporaryFile()
        try:
            process = subprocess.Popen(
                self.commands.command(_follow_args(verb, run_id, after)),
                env=self.commands.environment(), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=errors, text=True)
        except OSError as error:
            errors.close()
            raise TransportError("client.transport", "cannot start trellis: %s" % error)
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if line.strip():
                    yield json.loads(line)
            if process.wait() != 0:
                errors.seek(0)
                raise _failure(process.returncode, "", errors.read().decode(errors="replace"))
        finally:
            # Closing the iterator early ends this observer only; the run goes on.
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stdout:
                process.stdout.close()
            errors.close()


class AsyncLocalTransport:
    """The asyncio local transport."""

    def __init__(self, commands: LocalCommands):
        self.commands = commands

    async def _start(self, args: List[str], stderr: Any = asyncio.subprocess.PIPE) -> "asyncio.subprocess.Process":
        try:
            return await asyncio.create_subprocess_exec(
                *self.commands.command(args), env=self.commands.environment(),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=stderr, limit=16 * 1024 * 1024)
        except OSError as error:
            raise TransportError("client.transport", "cannot start trellis: %s" % error)

    async def _call(self, args: List[str]) -> str:
        process = await self._start(args)
        try:
            stdout, stderr = await process.communicate()
        except asyncio.CancelledError:
            # The command is a short client call (the run itself is detached): finish it in
            # the background rather than leave it half done.
            asyncio.ensure_future(process.wait())
            raise
        if process.returncode != 0:
            raise _failure(process.returncode or 1, stdout.decode(), stderr.decode())
        return stdout.decode()

    async def submit(self, submission: Submission) -> Receipt:
        with scratch_directory() as scratch:
            stdout = await self._call(submission.cli_arguments(scratch))
        return _receipt(stdout)

    async def status(self, run_id: str) -> Dict[str, Any]:
        return json.loads(await self._call(["status", run_id, "--json"]))

    async def list_runs(self, limit: int) -> Dict[str, Any]:
        return json.loads(await self._call(["list", "--json", "--limit", str(limit)]))

    async def force_stop(self, run_id: str) -> Dict[str, Any]:
        return json.loads(await self._call(["force-stop", run_id]))

    async def resume(self, run_id: str, from_checkpoint: Optional[int], force: bool) -> Receipt:
        return _receipt(await self._call(_resume_args(run_id, from_checkpoint, force)))

    async def checkpoints(self, run_id: str, after: Optional[int], limit: Optional[int]) -> Dict[str, Any]:
        return json.loads(await self._call(_checkpoint_args(run_id, after, limit)))

    async def follow(self, verb: str, run_id: str, after: Optional[str]) -> AsyncIterator[Dict[str, Any]]:
        errors = tempfile.TemporaryFile()
        try:
            process = await self._start(_follow_args(verb, run_id, after), stderr=errors)
        except BaseException:
            errors.close()
            raise
        try:
            assert process.stdout is not None
            while True:
                line = await process.stdout.readline()
                if not line:
                    break
                if line.strip():
                    yield json.loads(line)
            if await process.wait() != 0:
                errors.seek(0)
                raise _failure(process.returncode or 1, "", errors.read().decode(errors="replace"))
        finally:
            # A cancelled task or a closed iterator ends this observer only; the run goes on.
            if process.returncode is None:
                process.kill()
                await asyncio.shield(process.wait())
            errors.close()
