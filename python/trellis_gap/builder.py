"""Builders for GaP v3 workflows: `Workflow` (the top level) and `Subgraph` (one skill graph).

Both produce the exact JSON shape the Trellis loader reads, in a stable key order, so a graph
built here and one written by hand compare equal byte for byte. `Workflow.save()` writes the
file, writes every subgraph's checkpoint sidecar (`checkpoints/<subgraph>.py`), runs
`trellis validate --json` on it and returns the issues it reports.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import sysconfig
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

START = "START"
END = "END"

_NODE_TYPES = ("tool", "script", "router", "subgraph", "end", "noop")
_SUBGRAPH_NODE_TYPES = ("tool", "script", "router", "noop", "subgraph")
_VALIDATE_TIMEOUT_S = 120


class BuilderError(Exception):
    """An authoring mistake caught before the graph is written."""


@dataclass(frozen=True)
class ValidationIssue:
    """One issue of `trellis validate`: where (`node_id`), how bad, and what (rule id last)."""

    severity: str
    node_id: str
    field: Optional[str]
    message: str

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def __str__(self) -> str:
        location = self.node_id + ("." + self.field if self.field else "")
        return "[%s] %s: %s" % (self.severity, location, self.message)


def Ref(path: str) -> dict:
    """A `{"$ref": path}` input: another node's output field, or `in.<input>`."""
    if not isinstance(path, str) or not path:
        raise BuilderError("Ref path must be a non-empty string, got %r" % (path,))
    return {"$ref": path}


def _name(kind: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise BuilderError("%s must be a non-empty string, got %r" % (kind, value))
    if value in (START, END):
        raise BuilderError("%s %r is reserved" % (kind, value))
    return value


class _Graph:
    """Nodes, static edges and conditional edges: what workflows and subgraphs share."""

    def __init__(self) -> None:
        self._nodes: dict = {}
        self._edges: list = []
        self._conditional: dict = {}

    def _node(self, name: str, node_type: str, allowed: Sequence[str], *, tool=None,
              script=None, ref=None, status=None, recovery=(), inputs=None,
              streaming=False) -> None:
        name = _name("node name", name)
        if name in self._nodes:
            raise BuilderError("node %r already exists" % name)
        if node_type not in allowed:
            raise BuilderError("invalid node type %r; expected one of %s" % (node_type, list(allowed)))
        node: dict = {"type": node_type}
        if node_type == "tool":
            node["tool"] = _name("tool of node %r" % name, tool)
        elif node_type in ("script", "router"):
            node["script"] = _name("script of node %r" % name, script)
        elif node_type == "subgraph":
            node["ref"] = _name("ref of node %r" % name, ref)
        elif node_type == "end":
            if status not in ("success", "failure"):
                raise BuilderError("end node %r needs status 'success' or 'failure', got %r" % (name, status))
            node["status"] = status
        if streaming:
            if node_type not in ("tool", "script"):
                raise BuilderError("streaming=True is only valid on tool and script nodes, not %r" % node_type)
            node["streaming"] = True
        if inputs is not None:
            if not isinstance(inputs, Mapping):
                raise BuilderError("inputs of node %r must be a mapping" % name)
            node["inputs"] = json.loads(json.dumps(dict(inputs)))
        if recovery:
            if node_type != "end":
                raise BuilderError("only end nodes take recovery calls (node %r)" % name)
            node["recovery"] = [_recovery_call(call) for call in recovery]
        self._nodes[name] = node

    def add_edge(self, src: str, dst: str) -> None:
        """A static edge `src → dst` (`START` and `END` are the virtual ends)."""
        if not isinstance(src, str) or not isinstance(dst, str):
            raise BuilderError("add_edge needs node names, got %r → %r" % (src, dst))
        self._edges.append([src, dst])

    def add_conditional_edges(self, src: str, mapping: Mapping[str, str], *,
                              router_field: Optional[str] = None) -> None:
        """Dispatch from `src` on the value of its `router_field` (None for router nodes)."""
        if not isinstance(mapping, Mapping) or not mapping:
            raise BuilderError("the mapping of %r must be a non-empty mapping" % (src,))
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
            raise BuilderError("the mapping of %r must map strings to node names" % (src,))
        if src in self._conditional:
            raise BuilderError("node %r already has conditional edges" % (src,))
        if router_field is not None and not isinstance(router_field, str):
            raise BuilderError("router_field must be a string or None")
        self._conditional[src] = {"router_field": router_field, "mapping": dict(mapping)}

    def _edges_dict(self) -> list:
        return [list(edge) for edge in self._edges]

    def _conditional_dict(self) -> dict:
        return {src: {"router_field": c["router_field"], "mapping": dict(c["mapping"])}
                for src, c in self._conditional.items()}


def _recovery_call(call: Any) -> dict:
    if isinstance(call, Mapping) and isinstance(call.get("tool"), str) and call["tool"]:
        extra = set(call) - {"tool", "inputs"}
        if extra:
            raise BuilderError("recovery call has unknown keys %s" % sorted(extra))
        return {"tool": call["tool"], "inputs": dict(call.get("inputs") or {})}
    raise BuilderError("a recovery call is {'tool': name, 'inputs': {...}}, got %r" % (call,))


@dataclass
class _Checkpoint:
    name: str
    predicate: Union[str, Callable[..., Any]]
    diagnostics: Optional[Callable[..., Any]]
    rationale: str
    validate: bool
    weight: float


class Subgraph(_Graph):
    """One subgraph: tool, script, router and noop nodes with an exit contract."""

    def __init__(self, name: str, *, skill: str = "generic") -> None:
        super().__init__()
        self.name = _name("subgraph name", name)
        if not isinstance(skill, str):
            raise BuilderError("skill must be a string")
        self._skill = skill
        self._inputs: dict = {}
        self._outputs: dict = {}
        self._exit: dict = {"router_field": None, "success_values": []}
        self._on_error: Optional[str] = None
        self._checkpoints: list = []

    def add_node(self, name: str, *, type: str, tool: Optional[str] = None,
                 script: Optional[str] = None, ref: Optional[str] = None,
                 inputs: Optional[Mapping[str, Any]] = None, streaming: bool = False) -> None:
        """A node of the subgraph; `inputs` may hold literals, lists and `Ref(...)`s."""
        self._node(name, type, _SUBGRAPH_NODE_TYPES, tool=tool, script=script, ref=ref,
                   inputs=inputs, streaming=streaming)

    def add_input(self, name: str, *, type_name: str) -> None:
        """Declares an input (read inside as `Ref("in.<name>")`) of a registered type name."""
        name = _name("input name", name)
        if name in self._inputs:
            raise BuilderError("input %r already declared" % name)
        self._inputs[name] = _name("type name", type_name)

    def add_exit(self, name: str) -> None:
        """A success exit named by a terminal noop node (exit `router_field` stays null)."""
        if self._exit["router_field"] is not None:
            raise BuilderError("add_exit() and set_exit_router() cannot be combined")
        if name in self._exit["success_values"]:
            raise BuilderError("success value %r already declared" % name)
        self._node(name, "noop", ("noop",))
        self._exit["success_values"].append(name)

    def set_exit_router(self, *, router_field: str, success_values: Sequence[str]) -> None:
        """Exit values read from the terminal node's output field `router_field`."""
        if self._exit["success_values"] and self._exit["router_field"] is None:
            raise BuilderError("add_exit() and set_exit_router() cannot be combined")
        values = [str(v) for v in success_values]
        if not values:
            raise BuilderError("success_values must not be empty")
        self._exit = {"router_field": _name("router_field", router_field), "success_values": values}

    def set_outputs(self, **bindings: dict) -> None:
        """Binds the subgraph's outputs to node fields (`Ref("node.field")`); replaces earlier ones."""
        outputs = {}
        for name, value in bindings.items():
            if not (isinstance(value, Mapping) and set(value) == {"$ref"} and isinstance(value["$ref"], str)):
                raise BuilderError("output %r must be a Ref(...), got %r" % (name, value))
            outputs[name] = {"$ref": value["$ref"]}
        self._outputs = outputs

    def set_on_error(self, value: Optional[str]) -> None:
        """The exit value when the subgraph raises (None: errors propagate)."""
        if value is not None and not isinstance(value, str):
            raise BuilderError("on_error must be a string or None")
        self._on_error = value

    def add_checkpoint(self, name: str, predicate: Union[str, Callable[..., Any]], *,
                       diagnostics: Optional[Callable[..., Any]] = None, rationale: str = "",
                       validate: bool = True, weight: float = 1.0) -> None:
        """A postcondition judged against the world snapshot after a success exit.

        `predicate` is an expression over `world` and `outputs` (`"world.cube.z > 0.1"`) or a
        module-level function `f(world)` / `f(world, outputs)`; it is written to the sidecar
        `checkpoints/<subgraph>.py`. `validate=False` marks a probe that is never enforced.
        """
        name = _name("checkpoint name", name)
        if any(c.name == name for c in self._checkpoints):
            raise BuilderError("checkpoint %r already declared on %r" % (name, self.name))
        for role, fn in (("predicate", predicate), ("diagnostics", diagnostics)):
            if fn is None or isinstance(fn, str):
                continue
            if not callable(fn):
                raise BuilderError("checkpoint %r %s must be an expression or a function" % (name, role))
            if getattr(fn, "__name__", "") == "<lambda>":
                raise BuilderError("checkpoint %r: a lambda cannot be written to the sidecar; "
                                   "use an expression string or a def" % name)
        if isinstance(predicate, str) and not predicate.strip():
            raise BuilderError("checkpoint %r has an empty predicate" % name)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
            raise BuilderError("checkpoint %r weight must be a positive number" % name)
        self._checkpoints.append(_Checkpoint(name, predicate, diagnostics, str(rationale),
                                             bool(validate), float(weight)))

    def to_dict(self) -> dict:
        """The subgraph's JSON value (without its name)."""
        document = {
            "skill": self._skill,
            "inputs": dict(self._inputs),
            "outputs": {k: dict(v) for k, v in self._outputs.items()},
            "nodes": json.loads(json.dumps(self._nodes)),
            "edges": self._edges_dict(),
            "conditional_edges": self._conditional_dict(),
            "exit": {"router_field": self._exit["router_field"],
                     "success_values": list(self._exit["success_values"])},
        }
        if self._on_error is not None:
            document["on_error"] = self._on_error
        return document

    def checkpoints_source(self) -> Optional[str]:
        """The sidecar module, or None without checkpoints."""
        if not self._checkpoints:
            return None
        functions: dict = {}
        entries = []
        for index, checkpoint in enumerate(self._checkpoints):
            predicate = self._function(functions, checkpoint.predicate, "_predicate_%d" % index)
            entry = ("    {'name': %r, 'predicate': %s, 'validate': %r, 'rationale': %r, 'weight': %r"
                     % (checkpoint.name, predicate, checkpoint.validate, checkpoint.rationale,
                        checkpoint.weight))
            if checkpoint.diagnostics is not None:
                entry += ", 'diagnostics': %s" % self._function(
                    functions, checkpoint.diagnostics, "_diagnostics_%d" % index)
            entries.append(entry + "},")
        header = '"""Checkpoints of subgraph %r, written by trellis_gap.builder."""\n\n' % self.name
        return header + "\n\n".join(functions.values()) + "\n\nCHECKPOINTS = [\n" + "\n".join(entries) + "\n]\n"

    @staticmethod
    def _function(functions: dict, source: Union[str, Callable[..., Any]], fallback: str) -> str:
        if isinstance(source, str):
            functions[fallback] = "def %s(world, outputs):\n    return (%s)\n" % (fallback, source.strip())
            return fallback
        name = source.__name__
        try:
            text = textwrap.dedent(inspect.getsource(source))
        except (OSError, TypeError) as exc:
            raise BuilderError("cannot read the source of %r: %s" % (name, exc)) from exc
        if functions.get(name, text) != text:
            raise BuilderError("two different checkpoint functions are named %r" % name)
        functions[name] = text
        return name


class Workflow(_Graph):
    """The top level: subgraph calls, end nodes, and any inline tool/script/router nodes."""

    def __init__(self, *, meta: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__()
        self._meta = dict(meta or {})
        self._subgraphs: dict = {}

    def add_node(self, name: str, *, type: str, tool: Optional[str] = None,
                 script: Optional[str] = None, ref: Optional[str] = None,
                 status: Optional[str] = None, recovery: Iterable[Mapping[str, Any]] = (),
                 inputs: Optional[Mapping[str, Any]] = None, streaming: bool = False) -> None:
        """A top-level node; `end` nodes take `status` and optional `recovery` tool calls."""
        self._node(name, type, _NODE_TYPES, tool=tool, script=script, ref=ref, status=status,
                   recovery=tuple(recovery), inputs=inputs, streaming=streaming)

    def add_subgraph(self, subgraph: Subgraph) -> None:
        """Adds a subgraph under its name."""
        if not isinstance(subgraph, Subgraph):
            raise BuilderError("add_subgraph needs a Subgraph, got %r" % type(subgraph).__name__)
        if subgraph.name in self._subgraphs:
            raise BuilderError("subgraph %r already added" % subgraph.name)
        self._subgraphs[subgraph.name] = subgraph

    def to_dict(self) -> dict:
        """The workflow's JSON value; empty conditional edges and subgraphs are left out."""
        document = {"version": 3, "meta": json.loads(json.dumps(self._meta)),
                    "nodes": json.loads(json.dumps(self._nodes)), "edges": self._edges_dict()}
        if self._conditional:
            document["conditional_edges"] = self._conditional_dict()
        if self._subgraphs:
            document["subgraphs"] = {name: sg.to_dict() for name, sg in self._subgraphs.items()}
        return document

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def save(self, path: Union[str, os.PathLike], *, validate: bool = True,
             skills: Sequence[Union[str, os.PathLike]] = (), strict: bool = False,
             trellis: Optional[str] = None) -> list:
        """Writes `workflow.json` (to `path`, or into it when it is a directory) and the
        checkpoint sidecars beside it, then returns `trellis validate`'s issues (errors and
        warnings; an empty list is a clean graph). `validate=False` only writes."""
        target = Path(path)
        if target.is_dir() or target.suffix != ".json":
            target = target / "workflow.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.to_json() + "\n", encoding="utf-8")
        for subgraph in self._subgraphs.values():
            source = subgraph.checkpoints_source()
            if source is not None:
                sidecar = target.parent / "checkpoints" / (subgraph.name + ".py")
                sidecar.parent.mkdir(exist_ok=True)
                sidecar.write_text(source, encoding="utf-8")
        if not validate:
            return []
        return validate_file(target, skills=skills, strict=strict, trellis=trellis)


def _installed_binary() -> Optional[str]:
    """The `trellis` the wheel installed into this environment's scripts directory."""
    scripts = sysconfig.get_path("scripts")
    candidate = os.path.join(scripts, "trellis") if scripts else ""
    return candidate if candidate and os.access(candidate, os.X_OK) else None


def _trellis_binary(explicit: Optional[str]) -> str:
    found = explicit or os.environ.get("TRELLIS_BIN") or _installed_binary() or shutil.which("trellis")
    if not found:
        raise BuilderError("cannot find the trellis binary: set $TRELLIS_BIN or put trellis on PATH")
    return found


def validate_file(path: Union[str, os.PathLike], *, skills: Sequence[Union[str, os.PathLike]] = (),
                  strict: bool = False, trellis: Optional[str] = None) -> list:
    """Runs `trellis validate --json` on a workflow file and returns its issues."""
    command = [_trellis_binary(trellis), "validate", str(path), "--json"]
    for directory in skills:
        command += ["--skills", str(directory)]
    if strict:
        command.append("--strict")
    done = subprocess.run(command, capture_output=True, text=True, timeout=_VALIDATE_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        raise BuilderError("trellis validate failed (exit %s): %s"
                           % (done.returncode, (done.stderr or done.stdout).strip())) from None
    if report.get("status") == "unparseable":
        return [ValidationIssue("error", "workflow", None, str(report.get("error", "")))]
    return [ValidationIssue(i["severity"], i["node_id"], i.get("field"), i["message"])
            for i in report.get("issues", [])]
