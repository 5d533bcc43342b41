"""Authoring errors, validation issues returned by save(), and checkpoint sidecars that
`trellis run` evaluates."""

import json
import os
import pathlib
import subprocess

import pytest

from trellis_gap import BuilderError, Ref, Subgraph, ValidationIssue, Workflow

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "crates" / "trellis-gap" / "tests" / "fixtures"


def one_subgraph(sg):
    wf = Workflow()
    wf.add_node("call", type="subgraph", ref=sg.name)
    wf.add_node("done", type="end", status="success")
    wf.add_node("abort", type="end", status="failure")
    wf.add_edge("START", "call")
    wf.add_conditional_edges("call", {"ok": "done", "failed": "abort"}, router_field="exit")
    wf.add_subgraph(sg)
    return wf


def noop_subgraph(name="sg"):
    sg = Subgraph(name)
    sg.add_exit("ok")
    sg.add_edge("START", "ok")
    sg.add_edge("ok", "END")
    sg.set_on_error("failed")
    return sg


def test_authoring_mistakes_are_refused_early():
    sg = Subgraph("sg")
    sg.add_node("a", type="noop")
    with pytest.raises(BuilderError, match="already exists"):
        sg.add_node("a", type="noop")
    with pytest.raises(BuilderError, match="invalid node type 'end'"):
        sg.add_node("e", type="end", )
    with pytest.raises(BuilderError, match="reserved"):
        sg.add_node("START", type="noop")
    with pytest.raises(BuilderError, match="streaming=True"):
        sg.add_node("n", type="noop", streaming=True)
    with pytest.raises(BuilderError, match="tool of node"):
        sg.add_node("t", type="tool")
    with pytest.raises(BuilderError, match="must be a Ref"):
        sg.set_outputs(x={"$ref": "a.b", "extra": 1})
    with pytest.raises(BuilderError, match="a lambda cannot be written"):
        sg.add_checkpoint("c", lambda world: True)
    sg.add_exit("ok")
    with pytest.raises(BuilderError, match="cannot be combined"):
        sg.set_exit_router(router_field="status", success_values=["done"])
    wf = Workflow()
    with pytest.raises(BuilderError, match="status 'success' or 'failure'"):
        wf.add_node("end", type="end", status="ok")
    with pytest.raises(BuilderError, match="recovery call"):
        wf.add_node("end", type="end", status="failure", recovery=[{"inputs": {}}])
    with pytest.raises(BuilderError, match="non-empty mapping"):
        wf.add_conditional_edges("x", {})


def test_save_returns_the_validators_issues_in_order(tmp_path, trellis_bin):
    sg = Subgraph("sg")
    sg.add_node("work", type="tool", tool="robot.go_home")
    sg.add_exit("ok")
    sg.add_edge("work", "ok")
    sg.add_edge("ok", "END")
    issues = one_subgraph(sg).save(tmp_path)
    assert (tmp_path / "workflow.json").is_file()
    assert issues == [
        ValidationIssue("error", "subgraphs.sg.edges", None, issues[0].message),
        ValidationIssue("error", "subgraphs.sg.nodes.work", None, issues[1].message),
        ValidationIssue("error", "subgraphs.sg.nodes.ok", None, issues[2].message),
    ]
    assert [i.message.rsplit(" ", 1)[-1] for i in issues] == ["(S1)", "(S2)", "(S2)"]
    assert str(issues[0]).startswith("[error] subgraphs.sg.edges: ")


def test_save_checks_skill_contracts_with_skills_and_strict(tmp_path, trellis_bin):
    skills = tmp_path / "skills" / "lookout"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text(
        "---\nname: lookout\ndescription: Looks.\ngap:\n  exit_conditions: {ok: a, failed: b, none: c}\n---\n")
    sg = noop_subgraph()
    sg._skill = "lookout"
    wf = one_subgraph(sg)
    assert wf.save(tmp_path / "wf", skills=[tmp_path / "skills"]) == []
    issues = wf.save(tmp_path / "wf", skills=[tmp_path / "skills"], strict=True)
    assert [str(i) for i in issues] == [
        "[error] subgraphs.sg.exit: missing exit condition 'none' declared in lookout.exit_conditions"]


def lifted(world, outputs):
    return world.objects.cube.z > 0.1


def test_checkpoints_are_written_as_a_sidecar_that_trellis_run_evaluates(tmp_path, trellis_bin):
    sg = noop_subgraph()
    sg.add_checkpoint("gripper_open", "world.gripper.open", rationale="released")
    sg.add_checkpoint("lifted", lifted)
    sg.add_checkpoint("probe", "False", validate=False)
    wf = one_subgraph(sg)
    assert wf.save(tmp_path) == []
    sidecar = (tmp_path / "checkpoints" / "sg.py").read_text()
    assert "def lifted(world, outputs):" in sidecar and "CHECKPOINTS = [" in sidecar
    home = tmp_path / "home"
    done = subprocess.run(
        [trellis_bin, "run", str(tmp_path), "--connector", str(FIXTURES / "connectors" / "counter.py"),
         "--checkpoints", "strict", "--json"],
        capture_output=True, text=True, env=dict(os.environ, TRELLIS_HOME=str(home)), timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert [(c["name"], c["passed"]) for c in result["checkpoints"]] == [
        ("gripper_open", True), ("lifted", True)]


def test_exit_router_and_inputs_serialize_in_loader_order():
    sg = Subgraph("judge", skill="generic")
    sg.add_input("target", type_name="Se3Pose")
    sg.add_node("check", type="script", script="scripts/check.py", inputs={"pose": Ref("in.target")})
    sg.set_exit_router(router_field="verdict", success_values=["pass"])
    sg.add_edge("START", "check")
    sg.add_edge("check", "END")
    document = sg.to_dict()
    assert list(document) == ["skill", "inputs", "outputs", "nodes", "edges", "conditional_edges", "exit"]
    assert document["exit"] == {"router_field": "verdict", "success_values": ["pass"]}
    assert document["nodes"]["check"] == {"type": "script", "script": "scripts/check.py",
                                          "inputs": {"pose": {"$ref": "in.target"}}}
