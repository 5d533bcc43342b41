//! The fake's GraphQL endpoint (`POST /graphql`, `/api/graphql`), just for merge queues: the
//! pull request query (node id, head, `mergeQueueEntry`, the last `RemovedFromMergeQueueEvent`)
//! and the `enqueuePullRequest` mutation, answered in GitHub's `data`/`errors` shape. It does
//! not parse GraphQL: it tells the two operations apart by the names in the query text.

use serde_json::{Value, json};

use super::answer::{Answer, ok};
use super::world::{World, repo_key};

/// GitHub's GraphQL error answer (HTTP 200 with `errors`).
fn error(kind: &str, message: &str) -> Answer {
    ok(json!({"data": null, "errors": [{"type": kind, "message": message}]}))
}

fn node_id(issue_id: u64) -> String {
    format!("PR_kwDOfake{issue_id}")
}

pub(crate) fn answer(world: &mut World, body: &Value) -> Answer {
    let query = body
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let variables = body.get("variables").cloned().unwrap_or(Value::Null);
    if query.contains("enqueuePullRequest") {
        enqueue(world, &variables)
    } else if query.contains("pullRequest(") {
        pull_request(world, &variables)
    } else {
        error(
            "UNSUPPORTED",
            "the fake GitHub serves only the merge-queue operations over GraphQL",
        )
    }
}

fn pull_request(world: &mut World, variables: &Value) -> Answer {
    let text = |key: &str| {
        variables
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let full = format!("{}/{}", text("owner"), text("name"));
    let number = variables.get("number").and_then(Value::as_u64).unwrap_or(0);
    if world.repo(&full).is_none() {
        return error(
            "NOT_FOUND",
            &format!("Could not resolve to a Repository with the name '{full}'."),
        );
    }
    let Ok(head) = world.head_sha(&full, number) else {
        return error(
            "NOT_FOUND",
            &format!("Could not resolve to a PullRequest with the number of {number}."),
        );
    };
    let Some(repo) = world.repo(&full) else {
        return error("NOT_FOUND", "no repository");
    };
    let Some(issue) = repo.issues.get(&number) else {
        return error("NOT_FOUND", "no pull request");
    };
    let entry = repo
        .extras
        .queue
        .iter()
        .position(|n| *n == number)
        .map(|at| json!({"state": if at == 0 { "AWAITING_CHECKS" } else { "QUEUED" }, "position": at + 1}));
    let removals: Vec<Value> = repo
        .extras
        .removals
        .get(&number)
        .map(|(head, reason)| json!({"reason": reason, "beforeCommit": {"oid": head}}))
        .into_iter()
        .collect();
    ok(json!({"data": {"repository": {"pullRequest": {
        "id": node_id(issue.id),
        "headRefOid": head,
        "mergeQueueEntry": entry,
        "timelineItems": {"nodes": removals},
    }}}}))
}

fn enqueue(world: &mut World, variables: &Value) -> Answer {
    let id = variables
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let found = world.repos.iter().find_map(|(key, repo)| {
        repo.issues
            .values()
            .find(|i| i.pull.is_some() && node_id(i.id) == id)
            .map(|i| (key.clone(), i.number))
    });
    let Some((key, number)) = found else {
        return error(
            "NOT_FOUND",
            &format!("Could not resolve to a node with the global id of '{id}'"),
        );
    };
    let Ok(head) = world.head_sha(&key, number) else {
        return error("NOT_FOUND", "no pull request");
    };
    if let Some(expected) = variables.get("head").and_then(Value::as_str)
        && expected != head
    {
        return error(
            "UNPROCESSABLE",
            "The expected head OID does not match the pull request's head.",
        );
    }
    let Some(repo) = world.repos.get_mut(&repo_key(&key)) else {
        return error("NOT_FOUND", "no repository");
    };
    let base = repo
        .issues
        .get(&number)
        .and_then(|i| i.pull.as_ref())
        .map(|p| p.base_ref.clone())
        .unwrap_or_default();
    if !repo.extras.policy(&base).merge_queue {
        return error(
            "UNPROCESSABLE",
            "Pull request is not in a mergeable state: the base branch has no merge queue.",
        );
    }
    if !repo.extras.queue.contains(&number) {
        repo.extras.queue.push(number);
    }
    repo.extras.removals.remove(&number);
    let position = repo
        .extras
        .queue
        .iter()
        .position(|n| *n == number)
        .unwrap_or(0)
        + 1;
    ok(json!({"data": {"enqueuePullRequest": {"mergeQueueEntry": {
        "state": "QUEUED",
        "position": position,
    }}}}))
}
