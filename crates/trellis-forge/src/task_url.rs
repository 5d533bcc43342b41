//! A task URL (`https://HOST/OWNER/REPO/issues/N` or `…/pull/N`): what it points at, parsed
//! and written back in canonical form.

use serde::Serialize;

use crate::{ForgeError, RepoRef};

/// What a task URL points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    Issue,
    PullRequest,
}

/// A parsed `https://HOST/OWNER/REPO/issues/N` or `…/pull/N` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskUrl {
    pub host: String,
    pub repository: RepoRef,
    pub kind: TaskKind,
    pub number: u64,
}

impl TaskUrl {
    /// Parses an issue or pull request URL; a query, a fragment (`#issuecomment-…`) and a pull
    /// request sub-page (`/files`, `/commits`) are allowed and dropped.
    pub fn parse(url: &str) -> Result<TaskUrl, ForgeError> {
        let invalid = |reason: &str| ForgeError::InvalidTaskUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = url
            .trim()
            .strip_prefix("https://")
            .ok_or_else(|| invalid("it must start with https://"))?;
        let rest = rest.split(['#', '?']).next().unwrap_or_default();
        let mut parts = rest.split('/');
        let host = parts.next().unwrap_or_default().to_ascii_lowercase();
        let host = host.strip_prefix("www.").unwrap_or(&host).to_owned();
        if host.is_empty() {
            return Err(invalid("it names no host"));
        }
        let segments: Vec<&str> = parts.filter(|s| !s.is_empty()).collect();
        let [owner, name, kind, number, tail @ ..] = segments.as_slice() else {
            return Err(invalid(
                "expected /OWNER/REPO/issues/N or /OWNER/REPO/pull/N",
            ));
        };
        let kind = match (*kind, tail) {
            ("issues", []) => TaskKind::Issue,
            ("pull" | "pulls", [] | [_]) => TaskKind::PullRequest,
            _ => {
                return Err(invalid(
                    "expected /OWNER/REPO/issues/N or /OWNER/REPO/pull/N",
                ));
            }
        };
        let number = number
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| invalid("the number is not a positive integer"))?;
        let repository = RepoRef::new(owner, name).map_err(|_| invalid("bad owner/repository"))?;
        Ok(TaskUrl {
            host,
            repository,
            kind,
            number,
        })
    }

    /// The URL in canonical form (`https://HOST/OWNER/REPO/issues/N` or `…/pull/N`).
    pub fn canonical(&self) -> String {
        let kind = match self.kind {
            TaskKind::Issue => "issues",
            TaskKind::PullRequest => "pull",
        };
        format!(
            "https://{}/{}/{kind}/{}",
            self.host, self.repository, self.number
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_issue_and_pull_urls() {
        let issue = TaskUrl::parse("https://github.com/acme/app/issues/7#issuecomment-1").unwrap();
        assert_eq!(issue.kind, TaskKind::Issue);
        assert_eq!(issue.number, 7);
        assert_eq!(issue.canonical(), "https://github.com/acme/app/issues/7");
        let pull = TaskUrl::parse("https://www.github.com/acme/app/pull/12/files?w=1").unwrap();
        assert_eq!(pull.kind, TaskKind::PullRequest);
        assert_eq!(pull.host, "github.com");
        assert_eq!(pull.canonical(), "https://github.com/acme/app/pull/12");
        let enterprise = TaskUrl::parse("https://ghe.corp.example/team/svc/pull/3").unwrap();
        assert_eq!(enterprise.host, "ghe.corp.example");
    }

    #[test]
    fn rejects_other_urls() {
        for bad in [
            "http://github.com/acme/app/issues/7",
            "https://github.com/acme/app",
            "https://github.com/acme/app/issues/0",
            "https://github.com/acme/app/issues/x",
            "https://github.com/acme/app/issues/7/extra",
            "https://github.com/acme/app/discussions/7",
            "https://github.com/ac me/app/issues/7",
            "github.com/acme/app/issues/7",
        ] {
            assert_eq!(
                TaskUrl::parse(bad).unwrap_err().code(),
                "forge.invalid_task_url",
                "{bad}"
            );
        }
    }
}
