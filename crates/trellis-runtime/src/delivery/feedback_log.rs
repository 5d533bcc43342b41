//! Which pull-request feedback delivery already routed back to the change loop, kept in the
//! workspace's git directory so a resumed run knows it too.
//!
//! Feedback reported while the pull request's head was H counts as handled once delivery pushes
//! a head other than H (the worker had its round). Reported again at the same head — a retry
//! after a crash, before any new work — it is reported again, so nothing is lost.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::git::{DeliveryFailure, Git};

#[derive(Debug, Default, Serialize, Deserialize)]
struct Reports {
    reports: Vec<Report>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Report {
    head: String,
    keys: Vec<String>,
}

/// The routed feedback of one run branch.
pub(super) struct FeedbackLog {
    path: PathBuf,
    reports: Reports,
}

impl FeedbackLog {
    /// Reads the log of the branch `git` delivers (an absent or unreadable file is empty).
    pub async fn open(git: &Git<'_>, branch: &str) -> Result<FeedbackLog, DeliveryFailure> {
        let common = git.run(&["rev-parse", "--git-common-dir"]).await?;
        let common = PathBuf::from(common);
        let common = if common.is_absolute() {
            common
        } else {
            git.workspace.join(common)
        };
        let file: String = branch
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let path = common.join("trellis").join(format!("feedback-{file}.json"));
        let reports = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Ok(FeedbackLog { path, reports })
    }

    /// Keys handled by now: reported at a head other than `head`.
    pub fn acknowledged(&self, head: &str) -> BTreeSet<String> {
        self.reports
            .reports
            .iter()
            .filter(|r| r.head != head)
            .flat_map(|r| r.keys.iter().cloned())
            .collect()
    }

    /// Notes `keys` as reported at `head` (written before the verdict is returned).
    pub fn record(&mut self, head: &str, keys: Vec<String>) -> std::io::Result<()> {
        self.reports.reports.push(Report {
            head: head.to_owned(),
            keys,
        });
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_vec_pretty(&self.reports).map_err(std::io::Error::other)?;
        let temporary = self.path.with_extension("json.tmp");
        std::fs::write(&temporary, text)?;
        std::fs::rename(&temporary, &self.path)
    }
}
