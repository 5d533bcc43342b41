"""Trellis GaP bridge: runs script/router node bodies and Python tools for the Rust host.

Protocol: one JSON object per line. The host writes requests on our original stdin and we
answer on the original stdout; fd 0 is then /dev/null (a script reading stdin gets EOF instead
of eating requests) and fd 1 goes to stderr (stray prints cannot corrupt the stream). Every
request runs on its own thread; frames are tagged with the request id. No frame is longer than
the host's limit: a larger result becomes the request's error. The host runs this file with
bridge_bundles.py appended (skill bundles, connectors, checkpoints).
"""

import importlib.util
import inspect
import json
import math
import os
import sys
import threading
import time
import traceback
import types
import typing

_PROTO = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
_REQUESTS = os.fdopen(os.dup(0), "rb")
_NULL = os.open(os.devnull, os.O_RDONLY)
os.dup2(_NULL, 0)
os.close(_NULL)
sys.stdin = open(os.devnull, "r")
_MAX_FRAME = int(os.environ.pop("TRELLIS_BRIDGE_MAX_FRAME_BYTES", "524288"))
# Room for the frame around a printed line.
_MAX_LOG_LINE = _MAX_FRAME // 2
_WRITE_LOCK = threading.Lock()
_RUNS = {}
_RUNS_LOCK = threading.Lock()
_IMPORT_LOCKS = {}
_TOOL_MODULES = {}
_TOOL_MODULES_LOCK = threading.Lock()
_CURRENT = threading.local()
_PACKAGES_LOCK = threading.RLock()


def _send(frame):
    line = json.dumps(frame, allow_nan=False)
    if len(line) > _MAX_FRAME:
        raise ValueError("script output exceeds %d bytes" % _MAX_FRAME)
    with _WRITE_LOCK:
        _PROTO.write(line + "\n")
        _PROTO.flush()


def _jsonable(value):
    """Converts a return value to JSON: tuples/sets become lists, other objects their str()."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return "<bytes len=%d>" % len(value)
    return str(value)


class _LogStream:
    """Replaces sys.stdout/sys.stderr: each complete line becomes a `log` frame."""

    def __init__(self, name):
        self.name = name
        self._buffers = {}
        self._lock = threading.Lock()

    def write(self, text):
        run_id = getattr(_CURRENT, "run_id", None)
        with self._lock:
            buffered = self._buffers.get(run_id, "") + str(text)
            *lines, rest = buffered.split("\n")
            self._buffers[run_id] = rest
        for line in lines:
            _send_log(run_id, self.name, line)
        return len(text)

    def flush(self):
        run_id = getattr(_CURRENT, "run_id", None)
        with self._lock:
            rest = self._buffers.pop(run_id, "")
        if rest:
            _send_log(run_id, self.name, rest)

    def isatty(self):
        return False


def _send_log(run_id, stream, line):
    # json.dumps escapes non-ASCII, so a line may grow up to sixfold in its frame.
    if len(line) > _MAX_LOG_LINE // 6 and len(json.dumps(line)) > _MAX_LOG_LINE:
        line = line[: _MAX_LOG_LINE // 6] + "… [line truncated]"
    _send({"id": run_id, "kind": "log", "stream": stream, "line": line})


sys.stdout = _LogStream("stdout")
sys.stderr = _LogStream("stderr")


class TaskCancelled(Exception):
    """Raised by `ctx.cancel_token.raise_if_set()` once the host cancelled the node."""


class GuardLimitExceeded(BaseException):
    """A guard limit tripped; derives from BaseException so `except Exception` cannot swallow it."""


class ToolError(Exception):
    def __init__(self, tool, message):
        super().__init__(message)
        self.tool = tool


class ToolArgumentError(ToolError):
    pass


class WorkflowValidationError(Exception):
    pass


class CancelToken:
    def __init__(self):
        self._event = threading.Event()

    def is_set(self):
        return self._event.is_set()

    def cancel(self):
        self._event.set()

    def wait(self, timeout=None):
        return self._event.wait(timeout)

    def raise_if_set(self):
        if self._event.is_set():
            raise TaskCancelled("node cancelled")


class _RunState:
    def __init__(self, run_id):
        self.run_id = run_id
        self.cancel = CancelToken()
        self.replies = {}
        self.cond = threading.Condition()
        self.next_call = 0


class NodeContext:
    """The `ctx` a script or tool receives: tool calls, publishing and cancellation."""

    def __init__(self, state, node_id, streaming):
        self._state = state
        self.node_id = node_id
        self.streaming = streaming
        self.cancel_token = state.cancel
        self.policy_executor = None

    def tool(self, name, **kwargs):
        reply = _round_trip(self._state, {"kind": "tool_call", "tool": name,
                                          "kwargs": _jsonable(kwargs)})
        if reply["kind"] == "tool_result":
            return reply.get("value")
        error = reply.get("error", {})
        message = error.get("message", "")
        kind = error.get("type", "ToolError")
        if kind == "GuardLimitExceeded":
            raise GuardLimitExceeded(message)
        if kind == "TaskCancelled":
            raise TaskCancelled(message)
        if kind == "ToolArgumentError":
            raise ToolArgumentError(name, message)
        if kind == "KeyError":
            raise KeyError(message)
        raise ToolError(name, "%s: %s" % (kind, message) if message else kind)

    def publish(self, value):
        if not self.streaming:
            raise RuntimeError("ctx.publish() called on non-streaming node '%s'" % self.node_id)
        _send({"id": self._state.run_id, "kind": "publish", "value": _jsonable(value)})


def _round_trip(state, frame):
    """Sends a callback frame for this run and waits for the host's answer to it."""
    with state.cond:
        call_id = state.next_call
        state.next_call += 1
    frame = dict(frame, id=state.run_id, call_id=call_id)
    _send(frame)
    with state.cond:
        while call_id not in state.replies:
            state.cond.wait(0.5)
        return state.replies.pop(call_id)


def _import_fresh(path, module_name, package=None):
    if not os.path.isfile(path):
        raise FileNotFoundError("script file not found: %s" % path)
    if package:
        _install_bundle(package)
    lock = _IMPORT_LOCKS.setdefault(module_name, threading.Lock())
    with lock:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ImportError("cannot import %s" % path)
        module = importlib.util.module_from_spec(spec)
        if package:
            module.__package__ = module_name.rpartition(".")[0]
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        finally:
            sys.modules.pop(module_name, None)
    return module


def _required_output_keys(fn):
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        return []
    ret = hints.get("return")
    if ret is None or not typing.is_typeddict(ret):
        return []
    required = getattr(ret, "__required_keys__", None)
    if required is None:
        required = getattr(ret, "__annotations__", {}).keys()
    return sorted(required)


def _is_terminal(exc):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if getattr(type(exc), "terminal", False) is True:
            return True
        exc = getattr(exc, "cause", None) or exc.__cause__
    return False


def _error_payload(exc, wrapped):
    return {"type": type(exc).__name__, "message": str(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            "terminal": _is_terminal(exc), "wrapped": wrapped,
            "base_exception": not isinstance(exc, Exception)}


def _run_script(msg, state):
    streaming = bool(msg.get("streaming"))
    try:
        module = _import_fresh(msg["script_path"], msg["module_name"], msg.get("package"))
    except BaseException as exc:  # import errors propagate unwrapped in the reference
        return {"kind": "run_error", "error": _error_payload(exc, False)}
    fn = getattr(module, "run", None)
    if fn is None or not callable(fn):
        err = WorkflowValidationError("Script '%s' missing run() function" % msg.get("script_rel", ""))
        return {"kind": "run_error", "error": _error_payload(err, False)}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    accepted = [name for name in params if name != "ctx"]
    inputs = msg.get("inputs") or {}
    kept = {k: v for k, v in inputs.items() if k in accepted}
    dropped = [k for k in inputs if k not in accepted]
    ctx = NodeContext(state, msg.get("node_id", ""), streaming)
    _wrap_streams(kept, state)
    try:
        result = fn(ctx, **kept)
    except TaskCancelled:
        if streaming:
            return {"kind": "run_result", "value": None, "dropped": dropped}
        raise
    required = _required_output_keys(fn)
    if required:
        if not isinstance(result, dict):
            raise TypeError("Script run() must return a dict, got %s" % type(result).__name__)
        for key in required:
            if key not in result:
                raise KeyError("Script output missing declared key '%s'" % key)
    return {"kind": "run_result", "value": _jsonable(result), "dropped": dropped}


def _tool_module(path, package=None):
    with _TOOL_MODULES_LOCK:
        module = _TOOL_MODULES.get(path)
        if module is None:
            if package:
                _install_bundle(package)
                name = package["name"] + ".tools"
            else:
                name = "_trellis_tools_%d" % len(_TOOL_MODULES)
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError("cannot import tool module %s" % path)
            module = importlib.util.module_from_spec(spec)
            if package:
                module.__package__ = package["name"]
            sys.modules[name] = module
            spec.loader.exec_module(module)
            _TOOL_MODULES[path] = module
    return module


def _call_tool(msg, state):
    module = _tool_module(msg["module_path"], msg.get("package"))
    if msg["function"]:
        fn = getattr(module, msg["function"], None)
    else:
        fn = _DECORATED_TOOLS.get(msg["tool"])
    if fn is None or not callable(fn):
        what = ("function %s" % msg["function"]) if msg["function"] else ("no @tool(%r)" % msg["tool"])
        raise ToolError(msg["tool"], "%s not found in %s" % (what, msg["module_path"]))
    params = inspect.signature(fn).parameters
    var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    kwargs = msg.get("kwargs") or {}
    named = [n for n, p in params.items() if n != "ctx" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    extra = sorted(k for k in kwargs if k not in named)
    if extra and not var_kw:
        raise ToolArgumentError(msg["tool"], "tool '%s' got extraneous arguments %r; accepted: %s"
                                % (msg["tool"], extra, ", ".join(named)))
    ctx = NodeContext(state, msg.get("node_id", ""), bool(msg.get("streaming")))
    kwargs = _wrap_streams(dict(kwargs), state)
    if "ctx" in params:
        result = fn(ctx, **kwargs)
    else:
        result = fn(**kwargs)
    return {"kind": "run_result", "value": _jsonable(result)}


def _run_signature(fn):
    """Required/accepted parameter names of run() (ctx, *args, **kwargs left out)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    required, accepted, var_kw = [], [], False
    for name, param in params.items():
        if name == "ctx":
            continue
        if param.kind == param.VAR_KEYWORD:
            var_kw = True
            continue
        if param.kind == param.VAR_POSITIONAL:
            continue
        accepted.append(name)
        if param.default is param.empty:
            required.append(name)
    return {"required": required, "accepted": accepted, "var_kw": var_kw}


def _returned_fields(fn, module):
    """Field names of run()'s return TypedDict, or None when it declares none."""
    try:
        ret = typing.get_type_hints(fn, globalns=vars(module)).get("return")
        if ret is None or ret is type(None) or not hasattr(ret, "__annotations__"):
            return None
        return list(typing.get_type_hints(ret).keys())
    except Exception:
        return None


def _schema_error(fn, module):
    """Why run()'s typed schema cannot be read, or None."""
    try:
        hints = typing.get_type_hints(fn, globalns=vars(module))
    except Exception as exc:
        return "cannot resolve type hints on run(): %s" % exc
    for name, param in inspect.signature(fn).parameters.items():
        if name == "ctx" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if name not in hints:
            return "parameter '%s' on run() missing type annotation" % name
    ret = hints.get("return", type(None))
    if ret is not type(None) and not typing.is_typeddict(ret):
        return "run() return type must be a TypedDict or None, got %r" % (ret,)
    return None


def _introspect(msg, state):
    path = msg["script_path"]
    reply = {"kind": "introspect_result", "error": None, "signature": None, "returned": None}
    try:
        module = _import_fresh(path, "_trellis_introspect_%d" % state.run_id)
    except BaseException as exc:
        reply["error"] = "%s: %s" % (type(exc).__name__, exc)
        return reply
    fn = getattr(module, "run", None)
    if fn is None or not callable(fn):
        reply["error"] = "script '%s' missing run() function" % os.path.basename(path)
        return reply
    reply["signature"] = _run_signature(fn)
    reply["returned"] = _returned_fields(fn, module)
    try:
        reply["error"] = _schema_error(fn, module)
    except BaseException as exc:
        reply["error"] = "%s: %s" % (type(exc).__name__, exc)
    return reply


_HANDLERS = {"run": _run_script, "call_tool": _call_tool, "introspect": _introspect}


def _serve(msg):
    run_id = msg["id"]
    state = _RunState(run_id)
    with _RUNS_LOCK:
        _RUNS[run_id] = state
    _CURRENT.run_id = run_id
    try:
        reply = _HANDLERS[msg["kind"]](msg, state)
    except BaseException as exc:
        reply = {"kind": "run_error", "error": _error_payload(exc, True)}
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        with _RUNS_LOCK:
            _RUNS.pop(run_id, None)
    reply["id"] = run_id
    try:
        _send(reply)
    except (TypeError, ValueError) as exc:
        _send({"id": run_id, "kind": "run_error", "error": _error_payload(exc, True)})


def main():
    _install_gap_shims()
    _send({"id": None, "kind": "ready", "pid": os.getpid()})
    for raw in _REQUESTS:
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        kind = msg.get("kind")
        if kind in _HANDLERS:
            threading.Thread(target=_serve, args=(msg,), daemon=True).start()
        elif kind in ("tool_result", "tool_error", "stream_value", "stream_error"):
            with _RUNS_LOCK:
                state = _RUNS.get(msg.get("id"))
            if state is not None:
                with state.cond:
                    state.replies[msg.get("call_id")] = msg
                    state.cond.notify_all()
        elif kind == "cancel":
            with _RUNS_LOCK:
                state = _RUNS.get(msg.get("id"))
            if state is not None:
                state.cancel.cancel()
        elif kind == "shutdown":
            break
    _PROTO.flush()
    os._exit(0)
