//! The fake GitHub's state: repositories with their branches, issues, pull requests, comments,
//! reviews, check runs and commit statuses, and the scripted actions that change it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};

pub use super::action::Action;
use super::faults::Faults;
use super::policy::Extras;

/// The whole fake: every repository, keyed by lowercased `owner/name` (GitHub's names are
/// case-insensitive).
#[derive(Debug, Default)]
pub(crate) struct World {
    pub repos: BTreeMap<String, Repo>,
    /// Injected faults still to answer.
    pub faults: Faults,
    /// Answers held after serving: method, path suffix, milliseconds.
    pub holds: Vec<(String, String, u64)>,
    next_id: u64,
    tick: u64,
}

#[derive(Debug)]
pub(crate) struct Repo {
    pub id: u64,
    pub owner: String,
    pub name: String,
    pub default_branch: String,
    pub private: bool,
    pub branches: BTreeMap<String, String>,
    pub git_dir: Option<PathBuf>,
    pub next_number: u64,
    /// Issues and pull requests share one number space, as on GitHub.
    pub issues: BTreeMap<u64, Issue>,
    pub comments: Vec<Comment>,
    pub reviews: Vec<Review>,
    pub review_comments: Vec<ReviewComment>,
    pub check_runs: Vec<CheckRun>,
    /// Checks CI runs on every commit (see `Action::RequireChecks`).
    pub required_checks: Vec<String>,
    pub statuses: Vec<Status>,
    /// Merge methods, rules, protection, job logs, merge queue.
    pub extras: Extras,
}

impl Repo {
    /// The check runs of commit `sha`, with a `queued` run for every required check it has no
    /// run of yet.
    pub fn runs_on(&self, sha: &str) -> Vec<CheckRun> {
        let mut runs: Vec<CheckRun> = self
            .check_runs
            .iter()
            .filter(|r| r.sha == sha)
            .cloned()
            .collect();
        for name in &self.required_checks {
            if !runs.iter().any(|r| &r.name == name) {
                runs.push(CheckRun {
                    id: 0,
                    sha: sha.to_owned(),
                    name: name.clone(),
                    status: "queued".into(),
                    conclusion: None,
                    summary: String::new(),
                });
            }
        }
        runs
    }
}

#[derive(Debug)]
pub(crate) struct Issue {
    pub id: u64,
    pub number: u64,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    pub open: bool,
    pub author: String,
    pub created_at: String,
    pub updated_at: String,
    pub pull: Option<Pull>,
}

#[derive(Debug)]
pub(crate) struct Pull {
    pub head_ref: String,
    pub head_repository: String,
    pub head_sha: String,
    pub base_ref: String,
    pub base_sha: String,
    pub draft: bool,
    /// When it was merged (GitHub's `merged_at`); `None` while unmerged.
    pub merged_at: Option<String>,
    pub mergeable: Option<bool>,
    pub merge_commit_sha: Option<String>,
}

impl Pull {
    pub fn merged(&self) -> bool {
        self.merged_at.is_some()
    }
}

#[derive(Debug)]
pub(crate) struct Comment {
    pub id: u64,
    pub number: u64,
    pub body: String,
    pub author: String,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug)]
pub(crate) struct Review {
    pub id: u64,
    pub number: u64,
    pub state: String,
    pub body: String,
    pub author: String,
    pub commit_id: String,
    pub submitted_at: String,
}

#[derive(Debug)]
pub(crate) struct ReviewComment {
    pub id: u64,
    pub number: u64,
    pub path: String,
    pub line: u64,
    pub body: String,
    pub author: String,
    pub commit_id: String,
    pub created_at: String,
}

#[derive(Debug, Clone)]
pub(crate) struct CheckRun {
    pub id: u64,
    pub sha: String,
    pub name: String,
    pub status: String,
    pub conclusion: Option<String>,
    pub summary: String,
}

#[derive(Debug)]
pub(crate) struct Status {
    pub id: u64,
    pub sha: String,
    pub context: String,
    pub state: String,
    pub description: String,
}

const REVIEW_STATES: [&str; 4] = ["APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED"];
const CHECK_STATUSES: [&str; 3] = ["queued", "in_progress", "completed"];
const STATUS_STATES: [&str; 4] = ["success", "pending", "failure", "error"];

/// The key a repository is stored under.
pub(crate) fn repo_key(full_name: &str) -> String {
    full_name.to_ascii_lowercase()
}

impl World {
    pub fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A timestamp that grows with every change, so ordering by time is meaningful.
    pub fn now(&mut self) -> String {
        self.tick += 1;
        let t = self.tick;
        format!(
            "2026-01-01T{:02}:{:02}:{:02}Z",
            (t / 3600) % 24,
            (t / 60) % 60,
            t % 60
        )
    }

    /// A fresh commit-like id for commits the fake invents (merge commits).
    pub fn fresh_sha(&mut self) -> String {
        let id = self.id();
        format!("{id:040x}")
    }

    pub fn repo(&self, full_name: &str) -> Option<&Repo> {
        self.repos.get(&repo_key(full_name))
    }

    fn repo_mut(&mut self, full_name: &str) -> Result<&mut Repo, String> {
        self.repos
            .get_mut(&repo_key(full_name))
            .ok_or_else(|| format!("no repository {full_name}"))
    }

    /// Applies one scripted action; the answer names what was created.
    pub fn apply(&mut self, action: Action) -> Result<Value, String> {
        match action {
            Action::AddRepository {
                repository,
                default_branch,
                private,
                git_dir,
            } => {
                let (owner, name) = repository
                    .split_once('/')
                    .filter(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
                    .ok_or_else(|| format!("repository {repository:?} is not owner/name"))?;
                let id = self.id();
                let repo = Repo {
                    id,
                    owner: owner.into(),
                    name: name.into(),
                    default_branch,
                    private,
                    branches: BTreeMap::new(),
                    git_dir,
                    next_number: 1,
                    issues: BTreeMap::new(),
                    comments: Vec::new(),
                    reviews: Vec::new(),
                    review_comments: Vec::new(),
                    check_runs: Vec::new(),
                    required_checks: Vec::new(),
                    statuses: Vec::new(),
                    extras: Extras::default(),
                };
                self.repos.insert(repo_key(&repository), repo);
                Ok(json!({"id": id}))
            }
            Action::SetBranch {
                repository,
                branch,
                sha,
            } => {
                self.repo_mut(&repository)?.branches.insert(branch, sha);
                Ok(json!({}))
            }
            Action::AddIssue {
                repository,
                title,
                body,
                labels,
                author,
            } => {
                let number = self.open_issue(&repository, title, body, labels, author, None)?;
                Ok(json!({"number": number}))
            }
            Action::AddPull {
                repository,
                title,
                body,
                head,
                base,
                head_repository,
                head_sha,
                labels,
                draft,
                author,
            } => {
                let head_repository = head_repository.unwrap_or_else(|| repository.clone());
                let pull = self.new_pull(&repository, &head_repository, head, base, draft)?;
                let pull = Pull {
                    head_sha: head_sha.unwrap_or(pull.head_sha),
                    ..pull
                };
                let number =
                    self.open_issue(&repository, title, body, labels, author, Some(pull))?;
                Ok(json!({"number": number}))
            }
            Action::AddIssueComment {
                repository,
                number,
                body,
                author,
            } => {
                let id = self.add_comment(&repository, number, body, author)?;
                Ok(json!({"id": id}))
            }
            Action::AddReview {
                repository,
                number,
                state,
                body,
                author,
            } => {
                if !REVIEW_STATES.contains(&state.as_str()) {
                    return Err(format!(
                        "review state {state:?} is not one of {REVIEW_STATES:?}"
                    ));
                }
                let (id, at) = (self.id(), self.now());
                let commit_id = self.head_sha(&repository, number)?;
                self.repo_mut(&repository)?.reviews.push(Review {
                    id,
                    number,
                    state,
                    body,
                    author,
                    commit_id,
                    submitted_at: at,
                });
                Ok(json!({"id": id}))
            }
            Action::AddReviewComment {
                repository,
                number,
                path,
                line,
                body,
                author,
            } => {
                let (id, at) = (self.id(), self.now());
                let commit_id = self.head_sha(&repository, number)?;
                self.repo_mut(&repository)?
                    .review_comments
                    .push(ReviewComment {
                        id,
                        number,
                        path,
                        line,
                        body,
                        author,
                        commit_id,
                        created_at: at,
                    });
                Ok(json!({"id": id}))
            }
            Action::RequireChecks { repository, names } => {
                self.repo_mut(&repository)?.required_checks = names;
                Ok(json!({}))
            }
            Action::SetCheckRun {
                repository,
                sha,
                pull,
                name,
                status,
                conclusion,
                summary,
            } => {
                if !CHECK_STATUSES.contains(&status.as_str()) {
                    return Err(format!(
                        "check status {status:?} is not one of {CHECK_STATUSES:?}"
                    ));
                }
                let sha = self.target_sha(&repository, sha, pull)?;
                let id = self.id();
                let repo = self.repo_mut(&repository)?;
                repo.check_runs
                    .retain(|run| !(run.sha == sha && run.name == name));
                repo.check_runs.push(CheckRun {
                    id,
                    sha,
                    name,
                    status,
                    conclusion,
                    summary,
                });
                Ok(json!({"id": id}))
            }
            Action::SetStatus {
                repository,
                sha,
                pull,
                context,
                state,
                description,
            } => {
                if !STATUS_STATES.contains(&state.as_str()) {
                    return Err(format!(
                        "status state {state:?} is not one of {STATUS_STATES:?}"
                    ));
                }
                let sha = self.target_sha(&repository, sha, pull)?;
                let id = self.id();
                let repo = self.repo_mut(&repository)?;
                repo.statuses
                    .retain(|s| !(s.sha == sha && s.context == context));
                repo.statuses.push(Status {
                    id,
                    sha,
                    context,
                    state,
                    description,
                });
                Ok(json!({"id": id}))
            }
            Action::HoldAnswers {
                method,
                path_suffix,
                millis,
            } => {
                let method = method.to_ascii_uppercase();
                self.holds
                    .retain(|(m, p, _)| !(*m == method && *p == path_suffix));
                if millis > 0 {
                    self.holds.push((method, path_suffix, millis.min(600_000)));
                }
                Ok(json!({}))
            }
            fault @ (Action::FailNext { .. }
            | Action::StallNext { .. }
            | Action::ClearFaults {}) => self.faults.apply(fault),
            extra @ (Action::SetMergeMethods { .. }
            | Action::SetBranchRules { .. }
            | Action::SetBranchProtection { .. }
            | Action::SetJobLog { .. }
            | Action::CompleteMergeQueue { .. }
            | Action::RemoveFromMergeQueue { .. }
            | Action::EditIssueComment { .. }) => self.apply_extra(extra),
            Action::SetMergeable {
                repository,
                number,
                mergeable,
            } => {
                self.pull_mut(&repository, number)?.mergeable = mergeable;
                Ok(json!({}))
            }
        }
    }

    fn target_sha(
        &mut self,
        repository: &str,
        sha: Option<String>,
        pull: Option<u64>,
    ) -> Result<String, String> {
        match (sha, pull) {
            (Some(sha), None) => Ok(sha),
            (None, Some(number)) => self.head_sha(repository, number),
            _ => Err("give exactly one of sha and pull".into()),
        }
    }

    /// The current head commit of a pull request (refreshed from its branch).
    pub fn head_sha(&mut self, repository: &str, number: u64) -> Result<String, String> {
        self.refresh_head(repository, number);
        Ok(self.pull_mut(repository, number)?.head_sha.clone())
    }

    pub fn pull_mut(&mut self, repository: &str, number: u64) -> Result<&mut Pull, String> {
        self.repo_mut(repository)?
            .issues
            .get_mut(&number)
            .and_then(|issue| issue.pull.as_mut())
            .ok_or_else(|| format!("no pull request #{number} in {repository}"))
    }

    /// Builds a pull request's refs; the head branch must exist (in the fake or its git dir).
    pub fn new_pull(
        &mut self,
        repository: &str,
        head_repository: &str,
        head: String,
        base: String,
        draft: bool,
    ) -> Result<Pull, String> {
        let head_sha = self
            .branch_sha(head_repository, &head)
            .ok_or_else(|| format!("head branch {head} does not exist in {head_repository}"))?;
        let base_sha = self
            .branch_sha(repository, &base)
            .ok_or_else(|| format!("base branch {base} does not exist in {repository}"))?;
        Ok(Pull {
            head_ref: head,
            head_repository: head_repository.to_owned(),
            head_sha,
            base_ref: base,
            base_sha,
            draft,
            merged_at: None,
            mergeable: Some(true),
            merge_commit_sha: None,
        })
    }

    pub fn open_issue(
        &mut self,
        repository: &str,
        title: String,
        body: String,
        labels: Vec<String>,
        author: String,
        pull: Option<Pull>,
    ) -> Result<u64, String> {
        let (id, at) = (self.id(), self.now());
        let repo = self.repo_mut(repository)?;
        let number = repo.next_number;
        repo.next_number += 1;
        repo.issues.insert(
            number,
            Issue {
                id,
                number,
                title,
                body,
                labels,
                open: true,
                author,
                created_at: at.clone(),
                updated_at: at,
                pull,
            },
        );
        Ok(number)
    }

    pub fn add_comment(
        &mut self,
        repository: &str,
        number: u64,
        body: String,
        author: String,
    ) -> Result<u64, String> {
        let (id, at) = (self.id(), self.now());
        let repo = self.repo_mut(repository)?;
        if !repo.issues.contains_key(&number) {
            return Err(format!("no issue #{number} in {repository}"));
        }
        repo.comments.push(Comment {
            id,
            number,
            body,
            author,
            created_at: at.clone(),
            updated_at: at,
        });
        Ok(id)
    }

    /// The commit a branch points at: the fake's own record first, then the git directory.
    pub fn branch_sha(&self, repository: &str, branch: &str) -> Option<String> {
        let repo = self.repo(repository)?;
        if let Some(sha) = repo.branches.get(branch) {
            return Some(sha.clone());
        }
        let git_dir = repo.git_dir.as_ref()?;
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(git_dir)
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("refs/heads/{branch}^{{commit}}"))
            .output()
            .ok()?;
        let sha = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        (out.status.success() && !sha.is_empty()).then_some(sha)
    }

    /// Moves an open pull request's head to where its branch points now (a push happened).
    pub fn refresh_head(&mut self, repository: &str, number: u64) {
        let Some((head_repository, head_ref)) = self
            .repo(repository)
            .and_then(|r| r.issues.get(&number))
            .and_then(|i| i.pull.as_ref().filter(|p| !p.merged()).map(|p| (i, p)))
            .filter(|(issue, _)| issue.open)
            .map(|(_, p)| (p.head_repository.clone(), p.head_ref.clone()))
        else {
            return;
        };
        if let Some(sha) = self.branch_sha(&head_repository, &head_ref)
            && let Ok(pull) = self.pull_mut(repository, number)
        {
            pull.head_sha = sha;
        }
    }
}

/// The repository `route` already checked exists.
pub(crate) fn repo<'w>(world: &'w World, full: &str) -> &'w Repo {
    world
        .repos
        .get(&repo_key(full))
        .unwrap_or_else(|| unreachable!("route checks the repository first"))
}

pub(crate) fn is_pull(world: &World, full: &str, number: u64) -> bool {
    repo(world, full)
        .issues
        .get(&number)
        .is_some_and(|i| i.pull.is_some())
}
