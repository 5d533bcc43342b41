//! One item of pull-request feedback — a review, a comment, a failing check with its log —
//! with the stable key that keeps routed feedback from being reported twice, and its text.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::LogExcerpt;

/// Longest quoted text of one item.
const MAX_ITEM_CHARS: usize = 2_000;

/// One thing a reviewer or a check asks the change to fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FeedbackItem {
    /// A reviewer's latest review requests changes.
    ChangesRequested {
        review_id: u64,
        author: String,
        body: String,
        url: String,
    },
    /// An inline comment on a line of the diff (`line` is `None` once the line is outdated).
    ReviewComment {
        comment_id: u64,
        author: String,
        path: String,
        line: Option<u64>,
        body: String,
        url: String,
    },
    /// A completed check run on the head commit that is not green; `log` is the end of its
    /// job log when GitHub Actions ran it (or a note why the log is missing).
    FailingCheck {
        name: String,
        conclusion: String,
        summary: String,
        url: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        log: Option<LogExcerpt>,
    },
    /// A commit status on the head commit in `failure` or `error`.
    FailingStatus {
        context: String,
        state: String,
        description: String,
        url: String,
    },
    /// A conversation comment on the pull request (not a Trellis report), new or edited.
    Comment {
        comment_id: u64,
        author: String,
        body: String,
        url: String,
        /// GitHub's `updated_at`: an edit gives the item a new key.
        updated_at: String,
    },
    /// The summary text of a review that does not request changes (commented, approved).
    ReviewSummary {
        review_id: u64,
        author: String,
        state: String,
        body: String,
        url: String,
    },
}

fn short_hash(text: &str) -> String {
    hex::encode(&Sha256::digest(text.as_bytes())[..4])
}

fn clip(text: &str) -> String {
    let text = text.trim();
    let mut out: String = text.chars().take(MAX_ITEM_CHARS).collect();
    if text.chars().count() > MAX_ITEM_CHARS {
        out.push('…');
    }
    out
}

impl FeedbackItem {
    /// A stable key: the same feedback gets the same key on every look; an edited comment or
    /// a check failing on a new commit gets a new one.
    pub fn key(&self, head_sha: &str) -> String {
        match self {
            Self::ChangesRequested {
                review_id, body, ..
            } => format!("review:{review_id}:{}", short_hash(body)),
            Self::ReviewComment {
                comment_id, body, ..
            } => format!("review-comment:{comment_id}:{}", short_hash(body)),
            Self::FailingCheck { name, .. } => format!("check:{name}@{head_sha}"),
            Self::FailingStatus { context, .. } => format!("status:{context}@{head_sha}"),
            Self::Comment {
                comment_id,
                updated_at,
                ..
            } => format!("comment:{comment_id}:{updated_at}"),
            Self::ReviewSummary {
                review_id, body, ..
            } => format!("review-summary:{review_id}:{}", short_hash(body)),
        }
    }

    /// One readable entry of a diagnostic.
    pub fn describe(&self) -> String {
        let with_url = |text: String, url: &str| {
            if url.is_empty() {
                text
            } else {
                format!("{text}\n   ({url})")
            }
        };
        match self {
            Self::ChangesRequested {
                author, body, url, ..
            } => with_url(format!("{author} requested changes: {}", clip(body)), url),
            Self::ReviewComment {
                author,
                path,
                line,
                body,
                url,
                ..
            } => {
                let place = line.map_or_else(|| path.clone(), |l| format!("{path}:{l}"));
                with_url(
                    format!("{author} commented on {place}: {}", clip(body)),
                    url,
                )
            }
            Self::FailingCheck {
                name,
                conclusion,
                summary,
                url,
                log,
            } => {
                let summary = if summary.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", clip(summary))
                };
                let text = with_url(format!("check {name} ended {conclusion}{summary}"), url);
                match log {
                    Some(log) => format!("{text}\n   {}", log.describe()),
                    None => text,
                }
            }
            Self::Comment {
                author, body, url, ..
            } => with_url(format!("{author} commented: {}", clip(body)), url),
            Self::ReviewSummary {
                author,
                state,
                body,
                url,
                ..
            } => {
                let how = if state == "APPROVED" {
                    "approved with"
                } else {
                    "reviewed with"
                };
                with_url(format!("{author} {how} the summary: {}", clip(body)), url)
            }
            Self::FailingStatus {
                context,
                state,
                description,
                url,
            } => with_url(
                format!("status {context} is {state}: {}", clip(description)),
                url,
            ),
        }
    }
}
