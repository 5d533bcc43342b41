"""What `run(...)` sends: the `trellis run` arguments of local mode (documents given as values
are written to files) and the request body of remote mode, for a template, a graph and a
profile; arguments that cannot go together are refused before anything starts."""

import json

import pytest

from trellis_client.submission import Submission


def test_a_graph_document_becomes_files_locally_and_stays_a_document_remotely(tmp_path):
    graph = {"profile": "openengine.graph.full/v1"}
    submission = Submission(graph=graph, input={"value": 3}, uniform={"kind": "command"},
                            workspace="/work/here", title="t", submission_key="k",
                            no_preflight=True)
    args = submission.cli_arguments(str(tmp_path))
    assert args[:3] == ["run", "--json", "--detach"]
    graph_file = args[args.index("--graph") + 1]
    assert json.loads(open(graph_file).read()) == graph
    assert json.loads(open(args[args.index("--input") + 1]).read()) == {"value": 3}
    assert "--uniform-runtime-config" in args and "--no-preflight" in args
    assert args[args.index("--cwd") + 1] == "/work/here"
    assert submission.request_body() == {
        "graph": graph, "input": {"value": 3}, "plan": {"uniform": {"kind": "command"}},
        "workspace": "/work/here", "title": "t", "submissionKey": "k", "noPreflight": True}


def test_a_profile_is_passed_by_name(tmp_path):
    submission = Submission(profile="nightly", task="do it")
    args = submission.cli_arguments(str(tmp_path))
    assert args[args.index("--profile") + 1] == "nightly"
    assert submission.request_body() == {"profile": "nightly", "task": "do it"}


def test_a_template_with_its_delivery(tmp_path):
    submission = Submission(template="software-change", task="x", delivery="pull_request",
                            plan={"nodes": {}})
    args = submission.cli_arguments(str(tmp_path))
    assert args[args.index("--template") + 1] == "software-change"
    assert args[args.index("--delivery") + 1] == "pull_request"
    assert submission.request_body()["template"] == {"name": "software-change",
                                                     "delivery": "pull_request"}
    assert submission.request_body()["plan"] == {"exact": {"nodes": {}}}


@pytest.mark.parametrize("arguments", [
    {},
    {"template": "a", "graph": {}},
    {"template": "a", "plan": {}, "uniform": {}},
    {"template": "a", "task": "t", "input": {}},
    {"graph": {}, "delivery": "push"},
])
def test_arguments_that_cannot_go_together_are_refused(arguments):
    with pytest.raises(ValueError):
        Submission(**arguments)
