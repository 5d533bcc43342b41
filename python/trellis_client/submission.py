"""What `run(...)` was asked to start, checked once and turned into either `trellis run`
arguments (local mode) or the body of `POST /api/v1/runs` (remote mode)."""

import json
import os
import tempfile
from typing import Any, Dict, List, Optional, Union

PathOrDocument = Union[str, "os.PathLike[str]", Dict[str, Any]]


class Submission:
    """The arguments of `run(...)`: exactly one of `template`, `graph` or `profile`."""

    def __init__(
        self,
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
    ):
        chosen = [name for name, value in
                  (("template", template), ("graph", graph), ("profile", profile))
                  if value is not None]
        if len(chosen) != 1:
            raise ValueError("run() needs exactly one of template=, graph= or profile=")
        if plan is not None and uniform is not None:
            raise ValueError("give plan= (one binding per executable) or uniform=, not both")
        if task is not None and input is not None:
            raise ValueError("give task= or input=, not both")
        if delivery is not None and template is None:
            raise ValueError("delivery= goes with template=")
        self.template = template
        self.graph = graph
        self.profile = profile
        self.task = task
        self.input = input
        self.plan = plan
        self.uniform = uniform
        self.workspace = workspace
        self.title = title
        self.submission_key = submission_key
        self.delivery = delivery
        self.no_preflight = no_preflight

    def cli_arguments(self, scratch: str) -> List[str]:
        """`trellis run` arguments; documents given as values are written under `scratch`
        (read at admission, so it may be removed once the command returned)."""
        args = ["run", "--json", "--detach"]
        if self.template is not None:
            args += ["--template", self.template]
            if self.delivery is not None:
                args += ["--delivery", self.delivery]
        if self.graph is not None:
            args += ["--graph", _as_file(self.graph, scratch, "graph.json")]
        if self.profile is not None:
            args += ["--profile", self.profile]
        if self.task is not None:
            args += ["--task", self.task]
        if self.input is not None:
            args += ["--input", _as_file(self.input, scratch, "input.json")]
        if self.plan is not None:
            args += ["--runtime-config", _as_file(self.plan, scratch, "plan.json")]
        if self.uniform is not None:
            args += ["--uniform-runtime-config", _as_file(self.uniform, scratch, "uniform.json")]
        if self.workspace is not None:
            args += ["--cwd", os.fspath(self.workspace)]
        if self.title is not None:
            args += ["--title", self.title]
        if self.submission_key is not None:
            args += ["--submission-key", self.submission_key]
        if self.no_preflight:
            args.append("--no-preflight")
        return args

    def request_body(self) -> Dict[str, Any]:
        """The JSON body of `POST /api/v1/runs` (the `SubmitRequest` schema)."""
        body: Dict[str, Any] = {}
        if self.template is not None:
            template: Dict[str, Any] = {"name": self.template}
            if self.delivery is not None:
                template["delivery"] = self.delivery
            body["template"] = template
        if self.graph is not None:
            body["graph"] = _as_document(self.graph)
        if self.profile is not None:
            body["profile"] = self.profile
        if self.task is not None:
            body["task"] = self.task
        if self.input is not None:
            body["input"] = _as_document(self.input)
        if self.plan is not None:
            body["plan"] = {"exact": _as_document(self.plan)}
        if self.uniform is not None:
            body["plan"] = {"uniform": _as_document(self.uniform)}
        if self.workspace is not None:
            body["workspace"] = self.workspace
        if self.title is not None:
            body["title"] = self.title
        if self.submission_key is not None:
            body["submissionKey"] = self.submission_key
        if self.no_preflight:
            body["noPreflight"] = True
        return body


def _as_file(value: PathOrDocument, scratch: str, name: str) -> str:
    if isinstance(value, dict):
        path = os.path.join(scratch, name)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(value, handle)
        return path
    return os.fspath(value)


def _as_document(value: PathOrDocument) -> Any:
    if isinstance(value, dict):
        return value
    with open(os.fspath(value), encoding="utf-8") as handle:
        return json.load(handle)


def scratch_directory() -> "tempfile.TemporaryDirectory[str]":
    """A private directory for the documents of one `trellis run`."""
    return tempfile.TemporaryDirectory(prefix="trellis-client-")
