//! The comment half of delivery: the one marked report comment of a run lineage, posted on the
//! issue or pull request the input names, or edited when the lineage already posted it.

use serde_json::{Value, json};
use trellis_agents::{DeliveryBinding, ExecutionRequest};
use trellis_forge::{CommentAction, ReportMarker, TaskKind, TaskUrl};
use trellis_graph::WorkerErrorCode;

use super::calls::{connect, forge_failure, input_text, tried};
use super::git::DeliveryFailure;
use super::settings::ForgeSettings;

/// Posts the report comment on the issue or pull request the input's `url` names, or edits the
/// one this run lineage already posted there.
pub(super) async fn post_comment(
    forge: &ForgeSettings,
    lineage_key: &str,
    request: &ExecutionRequest,
    binding: &DeliveryBinding,
    log: &(dyn Fn(String) + Sync),
) -> Result<Value, DeliveryFailure> {
    let url = input_text(request, "url").unwrap_or_default();
    let body = input_text(request, "body").unwrap_or_default();
    if body.trim().is_empty() {
        return Err(DeliveryFailure {
            code: WorkerErrorCode::Malformed,
            message: "the report to post is empty".into(),
        });
    }
    let task = TaskUrl::parse(url).map_err(forge_failure)?;
    let github = connect(forge, &task.host, binding, request)?;
    let key = format!("run-{lineage_key}");
    let marker = ReportMarker::new(&key).map_err(forge_failure)?;
    log(format!(
        "delivery: posting the report on {}",
        task.canonical()
    ));
    // A retry lists the comments first: one GitHub stored before answering an error is found
    // by its marker and not posted again.
    let posted = tried(&forge.retry, "posting the report comment", log, || {
        github.post_report(&task.repository, task.number, &marker, body)
    })
    .await?;
    let did = match posted.action {
        CommentAction::Created => "posted",
        CommentAction::Updated => "updated",
        CommentAction::Unchanged => "found unchanged",
    };
    log(format!(
        "delivery: {did} report comment {}",
        posted.comment.html_url
    ));
    let scope = request.input.get("reviewScope");
    let revision = ["headRevision", "baseRevision"]
        .iter()
        .find_map(|f| scope.and_then(|s| s.get(*f)).and_then(Value::as_str));
    let mut receipt = json!({
        "version": "v1",
        "mode": "comment",
        "outcome": "posted",
        "repository": task.repository.to_string(),
        "url": task.canonical(),
        "discussionKind": match task.kind {
            TaskKind::Issue => "issue",
            TaskKind::PullRequest => "pull_request",
        },
        "discussionId": task.number.to_string(),
        "commentId": posted.comment.id.to_string(),
        "destinationUrl": posted.comment.html_url,
        "bodyHash": posted.body_hash,
    });
    if let Some(revision) = revision {
        receipt["sourceRevision"] = json!(revision);
    }
    Ok(json!({
        "output": {"receipt": receipt},
        "signals": {"delivery": "posted"},
        "diagnostic": {"message": format!("report comment {did}: {}", posted.comment.html_url)},
    }))
}
