"""The client's local mode against the real binary: an offline software-change run (command
bindings) submitted, watched to its end and read back, sync and async; a cancelled watch
leaves its run going to success; refusals arrive as typed errors with the run API's codes."""

import asyncio
import os

import pytest

from conftest import offline_plan
from trellis_client import (AdmissionRefused, AsyncClient, Client, Receipt,
                            RunNotFound, is_finished)

TASK = "Write a friendly greeting to greeting.txt"


def finished_output(status):
    assert status["status"]["phase"] == "finished", status["status"]
    result = status["status"]["terminalResult"]
    assert result["status"] == "succeeded", status
    return result.get("output")


def test_software_change_watched_to_the_end(trellis_bin, home, workspace):
    client = Client(home=home)
    receipt = client.run(template="software-change", task=TASK, plan=offline_plan(),
                         workspace=workspace, title="greeting")
    assert isinstance(receipt, Receipt) and receipt.run_id

    events = list(client.watch(receipt.run_id))
    kinds = [event["event"] for event in events]
    assert kinds[-1] == "terminal" and is_finished(events[-1]["status"])
    nodes = [event["execution"]["node"] for event in events if event["event"] == "node_completed"]
    # The reviewers reject the first attempt: the worker runs twice, each reviewer twice.
    assert nodes.count("worker") == 2, nodes
    assert sorted(set(nodes)) >= ["acceptance", "code", "worker"]
    assert all(event["runId"] == receipt.run_id for event in events)

    status = client.status(receipt.run_id)
    finished_output(status)
    assert status["title"] == "greeting"
    assert status["template"] == "software-change"
    with open(os.path.join(workspace, "greeting.txt")) as handle:
        assert handle.read() == "Hello, world!\n"

    messages = [entry["record"]["message"] for entry in client.logs(receipt.run_id)]
    assert any("repaired after review" in message for message in messages), messages

    listed = client.list_runs(limit=5)["runs"]
    assert [run["runId"] for run in listed] == [receipt.run_id]

    page = client.checkpoints(receipt.run_id)
    assert page["runId"] == receipt.run_id and isinstance(page["checkpoints"], list)

    # Watching again after a cursor replays only what followed it.
    middle = events[len(events) // 2]["cursor"]
    rest = list(client.watch(receipt.run_id, after=middle))
    assert [e["cursor"] for e in rest] == [e["cursor"] for e in events[len(events) // 2 + 1:]]


def test_closing_a_watch_early_detaches(trellis_bin, home, workspace):
    client = Client(home=home)
    receipt = client.run(template="software-change", task=TASK, plan=offline_plan(),
                         workspace=workspace)
    stream = client.watch(receipt.run_id)
    first = next(stream)
    assert first["runId"] == receipt.run_id
    stream.close()
    assert client.status(receipt.run_id)["status"]["phase"] != "finished"
    finished_output(client.wait(receipt.run_id))


def test_refusals_are_typed(trellis_bin, home, workspace):
    client = Client(home=home)
    with pytest.raises(RunNotFound) as missing:
        client.status("0190a1b2-0000-7000-8000-000000000000")
    assert missing.value.code == "run.not_found"
    with pytest.raises(RunNotFound) as unknown:
        client.status("not-a-run")
    assert "not-a-run" in unknown.value.message
    with pytest.raises(AdmissionRefused) as refused:
        client.run(template="no-such-template", task=TASK, plan=offline_plan(),
                   workspace=workspace)
    assert refused.value.code == "admission.unknown_template"
    with pytest.raises(RunNotFound):
        list(Client(home=home).watch("0190a1b2-0000-7000-8000-000000000000"))


def test_force_stop_and_resume(trellis_bin, home, workspace):
    client = Client(home=home)
    receipt = client.run(template="software-change", task=TASK, plan=offline_plan(),
                         workspace=workspace)
    next(iter(client.watch(receipt.run_id)))
    stopped = client.force_stop(receipt.run_id)
    assert stopped["runId"] == receipt.run_id
    final = client.wait(receipt.run_id)
    assert final["status"]["terminalResult"] == {"status": "failed", "reason": "force_stopped"}
    successor = client.resume(receipt.run_id)
    assert successor.run_id != receipt.run_id
    done = client.wait(successor.run_id)
    finished_output(done)
    assert done["predecessor"] == receipt.run_id


def test_async_watch_cancelled_midway_leaves_the_run_to_succeed(trellis_bin, home, workspace):
    async def scenario():
        client = AsyncClient(home=home)
        receipt = await client.run(template="software-change", task=TASK, plan=offline_plan(),
                                   workspace=workspace)
        seen = []
        first_event = asyncio.Event()

        async def watcher():
            async for update in client.watch(receipt.run_id):
                seen.append(update)
                first_event.set()

        task = asyncio.ensure_future(watcher())
        await asyncio.wait_for(first_event.wait(), 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not is_finished(seen[-1]["status"])
        assert (await client.status(receipt.run_id))["status"]["phase"] != "finished"
        # Cancelling an await of a plain call detaches too.
        status_call = asyncio.ensure_future(client.status(receipt.run_id))
        status_call.cancel()
        final = await asyncio.wait_for(client.wait(receipt.run_id), 120)
        return final

    final = asyncio.run(scenario())
    finished_output(final)
    with open(os.path.join(workspace, "greeting.txt")) as handle:
        assert handle.read() == "Hello, world!\n"


def test_async_software_change_and_logs(trellis_bin, home, workspace):
    async def scenario():
        client = AsyncClient(home=home)
        receipt = await client.run(template="software-change", task=TASK,
                                   plan=offline_plan(), workspace=workspace)
        events = [update async for update in client.watch(receipt.run_id)]
        logs = [entry async for entry in client.logs(receipt.run_id)]
        return events, logs, await client.status(receipt.run_id)

    events, logs, status = asyncio.run(scenario())
    assert events[-1]["event"] == "terminal"
    assert any(entry.get("node") == "worker" for entry in logs)
    finished_output(status)
