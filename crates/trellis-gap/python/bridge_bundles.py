"""Trellis GaP bridge, second part: skill-bundle packages and `load_prompt`, the `@tool`
decorator of bundle tools, the observation-stream handle, connectors and checkpoint sidecars.

Appended to bridge.py into one program; it uses that part's protocol helpers.
"""


def _synthetic_package(dotted, path=None):
    """Installs (once) an empty package `dotted` and its parents in sys.modules."""
    existing = sys.modules.get(dotted)
    if existing is not None:
        return existing
    parent, _, leaf = dotted.rpartition(".")
    if parent:
        _synthetic_package(parent)
    module = types.ModuleType(dotted)
    module.__package__ = dotted
    module.__path__ = [path] if path else []
    sys.modules[dotted] = module
    if parent:
        setattr(sys.modules[parent], leaf, module)
    return module


def _install_bundle(package):
    """The bundle's `gap_skills.<ns>.<bundle>` package (pinned at its directory) and `.scripts`."""
    with _PACKAGES_LOCK:
        root = _synthetic_package(package["name"], package["dir"])
        root.__gap_bundle_dir__ = package["dir"]
        root.__gap_prompts__ = dict(package.get("prompts") or {})
        _synthetic_package(package["name"] + ".scripts", package["scripts_dir"])


def load_prompt(package, name, **variables):
    """Reads prompt `name` of the skill bundle that `package` (a script's `__package__`) is in.

    `name` is a logical name from SKILL.md `gap.prompts`, else a path relative to the bundle
    (also tried under `prompts/`, with and without `.md`). `{{ key }}` placeholders are
    replaced by the keyword arguments.
    """
    bundle = None
    dotted = package or ""
    while dotted:
        bundle = getattr(sys.modules.get(dotted), "__gap_bundle_dir__", None)
        if bundle:
            prompts = sys.modules[dotted].__gap_prompts__
            break
        dotted = dotted.rpartition(".")[0]
    if not bundle:
        raise ValueError("load_prompt: package %r is not inside a skill bundle" % (package,))
    candidates = [prompts[name]] if name in prompts else []
    candidates += [name, os.path.join("prompts", name), os.path.join("prompts", name + ".md")]
    for rel in candidates:
        path = os.path.join(bundle, rel)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            for key, value in variables.items():
                for placeholder in ("{{%s}}" % key, "{{ %s }}" % key):
                    text = text.replace(placeholder, str(value))
            return text
    raise FileNotFoundError("load_prompt: no prompt %r in bundle %s" % (name, bundle))


def _install_gap_shims():
    """`gap.skills.load_prompt` for bundle scripts, unless a real `gap` package is installed."""
    try:
        if importlib.util.find_spec("gap") is not None:
            return
    except (ImportError, ValueError):
        return
    skills = _synthetic_package("gap.skills")
    skills.load_prompt = load_prompt
    skills.tool = tool
    _synthetic_package("gap.tools").tool = tool
    verify = _synthetic_package("gap.runtime.verify")
    verify.Checkpoint = Checkpoint
    verify.World = _World


class StreamUnavailable(Exception):
    """The observation stream has no observation yet (or none is running)."""


_STREAM_MARKER = "__trellis_observation_stream__"


class ObservationStreamHandle:
    """The observation stream as a node sees it; every read is recorded in the trace."""

    def __init__(self, state, name):
        self._state = state
        self.name = name

    def _read(self, timeout):
        reply = _round_trip(self._state, {"kind": "stream_latest", "name": self.name,
                                          "timeout": float(timeout)})
        if reply["kind"] != "stream_value":
            raise StreamUnavailable(reply.get("error", {}).get("message", "stream unavailable"))
        return reply.get("value"), reply.get("age_s", 0.0)

    def latest(self, timeout=2.0):
        return self._read(timeout)[0]

    def latest_with_age(self, timeout=2.0):
        return self._read(timeout)


def _wrap_streams(inputs, state):
    """Top-level input values standing for the observation stream become handles."""
    for key, value in list(inputs.items()):
        if isinstance(value, dict) and value.get(_STREAM_MARKER) is True and len(value) == 1:
            inputs[key] = ObservationStreamHandle(state, key)
    return inputs


_DECORATED_TOOLS = {}


def tool(name, summary="", scope="runtime", tags=()):
    """`@tool(name, …)`: registers a bundle's tool function under its flat tool name."""
    def register(fn):
        _DECORATED_TOOLS[name] = fn
        return fn
    return register


_CONNECTORS = {}


def _connector_call(msg, state):
    """Calls `function()` of a connector module (imported once); a missing one is reported."""
    path = msg["module_path"]
    with _TOOL_MODULES_LOCK:
        module = _CONNECTORS.get(path)
        if module is None:
            spec = importlib.util.spec_from_file_location("_trellis_connector_%d" % len(_CONNECTORS), path)
            if spec is None or spec.loader is None:
                raise ImportError("cannot import connector module %s" % path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _CONNECTORS[path] = module
    fn = getattr(module, msg["function"], None)
    if fn is None or not callable(fn):
        return {"kind": "run_result", "missing": True, "value": None}
    return {"kind": "run_result", "value": _jsonable(fn())}


class _World(dict):
    """A world snapshot: a dict whose keys also read as attributes, nested ones too."""

    def __getattr__(self, name):
        try:
            return _as_world(self[name])
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key):
        return _as_world(dict.__getitem__(self, key))


def _as_world(value):
    if isinstance(value, dict) and not isinstance(value, _World):
        return _World(value)
    return value


class Checkpoint:
    """A postcondition over the world snapshot (sidecars may also use plain dicts)."""

    def __init__(self, name, predicate, subgraph="", rationale="", validate=True, weight=1.0,
                 diagnostics_fn=None):
        self.name, self.predicate, self.subgraph = name, predicate, subgraph
        self.rationale, self.validate, self.weight = rationale, validate, weight
        self.diagnostics_fn = diagnostics_fn


def _call_arity(fn, world, outputs):
    """`fn(world, outputs)` when it takes two positional parameters, else `fn(world)`."""
    try:
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        positional = [p for p in inspect.signature(fn).parameters.values() if p.kind in kinds]
        two = len(positional) >= 2
    except (TypeError, ValueError):
        two = False
    return fn(world, outputs) if two else fn(world)


def _checkpoints(msg, state):
    path = msg["path"]
    namespace = {"__name__": "_checkpoints_" + os.path.splitext(os.path.basename(path))[0],
                 "__file__": path, "Checkpoint": Checkpoint}
    with open(path, encoding="utf-8") as handle:
        exec(compile(handle.read(), path, "exec"), namespace)
    entries = namespace.get("CHECKPOINTS")
    if not isinstance(entries, list):
        raise ValueError("checkpoint module %s did not export CHECKPOINTS as a list" % path)
    world = _as_world(msg.get("world"))
    outputs = msg.get("outputs") or {}
    results = []
    for index, entry in enumerate(entries):
        get = entry.get if isinstance(entry, dict) else (lambda key, default=None, e=entry: getattr(e, key, default))
        name, predicate = get("name"), get("predicate")
        if not isinstance(name, str) or not callable(predicate):
            raise ValueError("CHECKPOINTS[%d] needs a string name and a callable predicate" % index)
        if not get("validate", True):
            continue
        started = time.perf_counter()
        passed, error, diagnostics = False, None, None
        try:
            passed = bool(_call_arity(predicate, world, outputs))
        except Exception as exc:
            error = "%s: %s" % (type(exc).__name__, exc)
        diagnose = get("diagnostics_fn") or get("diagnostics")
        if callable(diagnose):
            try:
                found = _call_arity(diagnose, world, outputs)
                diagnostics = _jsonable(found) if isinstance(found, dict) else None
            except Exception:
                diagnostics = None
        results.append({"name": name, "passed": passed, "validate": True, "eval_error": error,
                        "diagnostics": diagnostics, "eval_time_s": time.perf_counter() - started})
    return {"kind": "checkpoint_results", "results": results}


_HANDLERS.update({"connector_call": _connector_call, "checkpoints": _checkpoints})


if __name__ == "__main__":
    main()
