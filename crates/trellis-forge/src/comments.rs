//! The one report comment a run posts on an issue or pull request. It carries a hidden marker
//! naming the report, so a retried or resumed post finds and edits it instead of adding a
//! second one.

use reqwest::Method;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::client::Op;
use crate::models::IssueComment;
use crate::{ForgeError, GitHub, RepoRef};

/// Longest report key.
const MAX_KEY_CHARS: usize = 128;

/// The hidden marker of one report: `<!-- trellis-report:KEY -->` on the comment's first line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportMarker {
    line: String,
}

impl ReportMarker {
    /// A marker for `key` (e.g. the run lineage's id); 1 to 128 of `A-Z a-z 0-9 . _ : -`.
    pub fn new(key: &str) -> Result<ReportMarker, ForgeError> {
        let valid = !key.is_empty()
            && key.len() <= MAX_KEY_CHARS
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
        if !valid {
            return Err(ForgeError::InvalidReportKey {
                marker: key.to_owned(),
            });
        }
        Ok(ReportMarker {
            line: format!("{MARKER_PREFIX}{key} -->"),
        })
    }

    /// The marker line as it appears in the comment.
    pub fn line(&self) -> &str {
        &self.line
    }

    /// The full comment text for a report body.
    pub fn comment_body(&self, body: &str) -> String {
        format!("{}\n{}", self.line, body)
    }

    fn marks(&self, comment: &IssueComment) -> bool {
        comment
            .body
            .as_deref()
            .and_then(|b| b.lines().next())
            .is_some_and(|first| first.trim() == self.line)
    }
}

/// The prefix every report marker line starts with.
const MARKER_PREFIX: &str = "<!-- trellis-report:";

/// Whether a comment body is a Trellis report (its first line is any report marker): such
/// comments are never feedback.
pub fn is_report_comment(body: &str) -> bool {
    body.lines()
        .next()
        .is_some_and(|first| first.trim().starts_with(MARKER_PREFIX))
}

/// What [`GitHub::post_report`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentAction {
    Created,
    Updated,
    /// The marked comment already had this exact body.
    Unchanged,
}

/// The report comment and what was done to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentOutcome {
    pub comment: IssueComment,
    pub action: CommentAction,
    /// SHA-256 (hex) of the report body as given (without the marker).
    pub body_hash: String,
}

/// SHA-256 of a report body, hex: what a comment receipt's `bodyHash` holds.
pub fn body_hash(body: &str) -> String {
    hex::encode(Sha256::digest(body.as_bytes()))
}

impl GitHub {
    /// Every conversation comment on an issue or pull request, oldest first.
    pub async fn issue_comments(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<IssueComment>, ForgeError> {
        let op = Op {
            repo,
            action: "list comments",
            resource: Some(format!("issue #{number}")),
        };
        let path = format!("{}/issues/{number}/comments", repo.api_path());
        self.call_all(&path, &[], &op).await
    }

    /// Posts the report `body` on issue or pull request `number`, or edits the comment that
    /// already carries `marker` (the first one, should there be several).
    pub async fn post_report(
        &self,
        repo: &RepoRef,
        number: u64,
        marker: &ReportMarker,
        body: &str,
    ) -> Result<CommentOutcome, ForgeError> {
        let text = marker.comment_body(body);
        let body_hash = body_hash(body);
        let existing = self
            .issue_comments(repo, number)
            .await?
            .into_iter()
            .find(|c| marker.marks(c));
        let payload = json!({ "body": text });
        match existing {
            Some(comment) if comment.body.as_deref() == Some(text.as_str()) => Ok(CommentOutcome {
                comment,
                action: CommentAction::Unchanged,
                body_hash,
            }),
            Some(comment) => {
                let op = Op {
                    repo,
                    action: "edit the report comment",
                    resource: Some(format!("comment {}", comment.id)),
                };
                let path = format!("{}/issues/comments/{}", repo.api_path(), comment.id);
                let comment = self
                    .call(Method::PATCH, &path, &[], Some(&payload), &op)
                    .await?;
                Ok(CommentOutcome {
                    comment,
                    action: CommentAction::Updated,
                    body_hash,
                })
            }
            None => {
                let op = Op {
                    repo,
                    action: "post the report comment",
                    resource: Some(format!("issue #{number}")),
                };
                let path = format!("{}/issues/{number}/comments", repo.api_path());
                let comment = self
                    .call(Method::POST, &path, &[], Some(&payload), &op)
                    .await?;
                Ok(CommentOutcome {
                    comment,
                    action: CommentAction::Created,
                    body_hash,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_hidden_first_lines() {
        let marker = ReportMarker::new("run-0190ab:review").unwrap();
        assert_eq!(
            marker.comment_body("Looks good."),
            "<!-- trellis-report:run-0190ab:review -->\nLooks good."
        );
        for bad in ["", "a b", "x-->", &"k".repeat(129)] {
            assert_eq!(
                ReportMarker::new(bad).unwrap_err().code(),
                "forge.invalid_report_key"
            );
        }
    }
}
