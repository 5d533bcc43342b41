//! Merge queues through GitHub's GraphQL API (REST has no merge-queue endpoints): where a pull
//! request stands in its base branch's queue, whether the queue removed it at its current
//! head, and adding it (`enqueuePullRequest`).

use serde::Serialize;
use serde_json::{Value, json};

use crate::client::Op;
use crate::{ForgeError, GitHub, RepoRef};

const STATE_QUERY: &str = "query($owner: String!, $name: String!, $number: Int!) { \
    repository(owner: $owner, name: $name) { pullRequest(number: $number) { \
    id headRefOid mergeQueueEntry { state position } \
    timelineItems(last: 1, itemTypes: [REMOVED_FROM_MERGE_QUEUE_EVENT]) { nodes { \
    ... on RemovedFromMergeQueueEvent { reason beforeCommit { oid } } } } } } }";

const ENQUEUE: &str = "mutation($id: ID!, $head: GitObjectID) { \
    enqueuePullRequest(input: {pullRequestId: $id, expectedHeadOid: $head}) { \
    mergeQueueEntry { state position } } }";

/// A pull request's entry in a merge queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueEntry {
    /// GitHub's `MergeQueueEntryState`: `QUEUED`, `AWAITING_CHECKS`, `MERGEABLE`,
    /// `UNMERGEABLE`, `LOCKED`.
    pub state: String,
    /// 1-based place in the queue, when GitHub tells it.
    pub position: Option<u64>,
}

/// Where a pull request stands with the merge queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueStanding {
    /// The pull request's GraphQL node id (what `enqueuePullRequest` takes).
    pub node_id: String,
    pub entry: Option<QueueEntry>,
    /// The reason of the queue's last removal of it, when that happened at `head`.
    pub removed_reason: Option<String>,
}

fn entry(value: &Value) -> Option<QueueEntry> {
    let state = value.get("state")?.as_str()?.to_owned();
    Some(QueueEntry {
        state,
        position: value.get("position").and_then(Value::as_u64),
    })
}

impl GitHub {
    pub(crate) async fn queue_standing(
        &self,
        repo: &RepoRef,
        number: u64,
        head: &str,
    ) -> Result<QueueStanding, ForgeError> {
        let op = Op {
            repo,
            action: "read the merge queue entry",
            resource: Some(format!("pull request #{number}")),
        };
        let variables = json!({"owner": repo.owner(), "name": repo.name(), "number": number});
        let data = self.graphql(STATE_QUERY, variables, &op).await?;
        let pull = data
            .pointer("/repository/pullRequest")
            .ok_or_else(|| ForgeError::NotFound {
                repository: repo.to_string(),
                resource: format!("pull request #{number}"),
            })?;
        let node_id = pull
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| ForgeError::Decode {
                action: op.action.to_owned(),
                message: "the pull request has no node id".into(),
            })?
            .to_owned();
        let removed_reason = pull
            .pointer("/timelineItems/nodes/0")
            .filter(|n| n.pointer("/beforeCommit/oid").and_then(Value::as_str) == Some(head))
            .map(|n| {
                n.get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given")
                    .to_owned()
            });
        Ok(QueueStanding {
            node_id,
            entry: pull.get("mergeQueueEntry").and_then(entry),
            removed_reason,
        })
    }

    /// Adds the pull request (node `node_id`, at head `head`) to its base branch's merge queue.
    pub(crate) async fn enqueue(
        &self,
        repo: &RepoRef,
        number: u64,
        node_id: &str,
        head: &str,
    ) -> Result<QueueEntry, ForgeError> {
        let op = Op {
            repo,
            action: "add the pull request to the merge queue",
            resource: Some(format!("pull request #{number}")),
        };
        let data = self
            .graphql(ENQUEUE, json!({"id": node_id, "head": head}), &op)
            .await?;
        data.pointer("/enqueuePullRequest/mergeQueueEntry")
            .and_then(entry)
            .ok_or_else(|| ForgeError::Decode {
                action: op.action.to_owned(),
                message: "no merge queue entry in the answer".into(),
            })
    }
}
