"""The same client against a `trellis serve` on loopback (url + bearer token): the offline
software-change run submitted over HTTP, watched to its end over SSE and read back, sync and
async; a cancelled asyncio watch leaves the run going to success; problems arrive typed."""

import asyncio
import os

import pytest

from conftest import offline_plan
from trellis_client import (AsyncClient, Client, Conflict, RunNotFound, TrellisError,
                            Unauthorized, is_finished)

TASK = "Write a friendly greeting to greeting.txt"


def succeeded(status):
    assert status["status"]["phase"] == "finished", status["status"]
    assert status["status"]["terminalResult"]["status"] == "succeeded", status


def test_remote_run_watched_to_the_end(server):
    client = Client(server.url, server.token)
    receipt = client.run(template="software-change", task=TASK, plan=offline_plan(),
                         workspace="greeting", submission_key="greeting-1")
    assert receipt.created is True
    again = client.run(template="software-change", task=TASK, plan=offline_plan(),
                       workspace="greeting", submission_key="greeting-1")
    assert again.run_id == receipt.run_id and again.created is False

    events = list(client.watch(receipt.run_id))
    assert events[-1]["event"] == "terminal" and is_finished(events[-1]["status"])
    nodes = [e["execution"]["node"] for e in events if e["event"] == "node_completed"]
    assert nodes.count("worker") == 2, nodes

    status = client.status(receipt.run_id)
    succeeded(status)
    with open(os.path.join(str(server.workspaces), "greeting", "greeting.txt")) as handle:
        assert handle.read() == "Hello, world!\n"
    messages = [entry["record"]["message"] for entry in client.logs(receipt.run_id)]
    assert any("repaired after review" in message for message in messages), messages
    assert receipt.run_id in [run["runId"] for run in client.list_runs(limit=5)["runs"]]
    page = client.checkpoints(receipt.run_id, limit=5)
    assert page["runId"] == receipt.run_id

    with pytest.raises(Conflict) as conflict:
        client.resume(receipt.run_id)
    assert conflict.value.code in ("run.nothing_to_resume", "run.already_resumed")
    assert conflict.value.status == 409


def test_remote_refusals_are_typed(server):
    client = Client(server.url, server.token)
    with pytest.raises(RunNotFound) as missing:
        client.status("0190a1b2-0000-7000-8000-000000000000")
    assert (missing.value.code, missing.value.status) == ("run.not_found", 404)
    with pytest.raises(Unauthorized):
        Client(server.url, "wrong-token").status("0190a1b2-0000-7000-8000-000000000000")
    with pytest.raises(TrellisError) as refused:
        client.run(template="no-such-template", task=TASK, plan=offline_plan())
    assert refused.value.code == "admission.unknown_template"
    assert refused.value.status == 422


def test_remote_force_stop(server):
    client = Client(server.url, server.token)
    receipt = client.run(template="software-change", task=TASK, plan=offline_plan(),
                         workspace="stopped")
    next(iter(client.watch(receipt.run_id)))
    client.force_stop(receipt.run_id)
    final = client.wait(receipt.run_id)
    assert final["status"]["terminalResult"] == {"status": "failed", "reason": "force_stopped"}


def test_remote_async_watch_cancelled_midway_leaves_the_run_to_succeed(server):
    async def scenario():
        client = AsyncClient(server.url, server.token)
        receipt = await client.run(template="software-change", task=TASK,
                                   plan=offline_plan(), workspace="cancelled")
        first_event = asyncio.Event()
        seen = []

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
        events = [update async for update in client.watch(receipt.run_id)]
        return events, await client.status(receipt.run_id)

    events, final = asyncio.run(scenario())
    assert events[-1]["event"] == "terminal"
    succeeded(final)
