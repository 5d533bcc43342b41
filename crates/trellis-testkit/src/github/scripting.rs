//! Scripting helpers of the fake GitHub for merge policy, CI logs, the merge queue and the
//! pull request conversation (each one [`Action`]; a script error panics, as a test bug).

use serde_json::Value;

use super::{Action, FakeGitHub};

impl FakeGitHub {
    /// Sets which merge methods the repository allows.
    pub fn set_merge_methods(&self, repository: &str, merge: bool, squash: bool, rebase: bool) {
        self.must(Action::SetMergeMethods {
            repository: repository.into(),
            allow_merge_commit: merge,
            allow_squash_merge: squash,
            allow_rebase_merge: rebase,
        });
    }

    /// Replaces the ruleset rules of `branch` (GitHub's rule objects).
    pub fn set_branch_rules(&self, repository: &str, branch: &str, rules: Vec<Value>) {
        self.must(Action::SetBranchRules {
            repository: repository.into(),
            branch: branch.into(),
            rules,
        });
    }

    /// Protects `branch` (required checks, linear history); `readable: false` answers 403 to
    /// reading the protection.
    pub fn set_branch_protection(
        &self,
        repository: &str,
        branch: &str,
        required_checks: &[&str],
        linear_history: bool,
        readable: bool,
    ) {
        self.must(Action::SetBranchProtection {
            repository: repository.into(),
            branch: branch.into(),
            required_checks: required_checks.iter().map(|c| (*c).to_owned()).collect(),
            strict: false,
            required_approvals: 0,
            linear_history,
            readable,
            remove: false,
        });
    }

    /// Gives check run `name` on the head of pull request `number` a GitHub Actions job log
    /// (`status` 200, or 403/404/410 for a log that cannot be read).
    pub fn set_job_log(&self, repository: &str, number: u64, name: &str, log: &str, status: u16) {
        self.must(Action::SetJobLog {
            repository: repository.into(),
            sha: None,
            pull: Some(number),
            name: name.into(),
            log: log.into(),
            status: Some(status),
        });
    }

    /// Adds a conversation comment to an issue or pull request; returns its id.
    pub fn add_issue_comment(
        &self,
        repository: &str,
        number: u64,
        author: &str,
        body: &str,
    ) -> u64 {
        self.id(Action::AddIssueComment {
            repository: repository.into(),
            number,
            body: body.into(),
            author: author.into(),
        })
    }

    /// A person edits conversation comment `id`.
    pub fn edit_issue_comment(&self, repository: &str, id: u64, body: &str) {
        self.must(Action::EditIssueComment {
            repository: repository.into(),
            id,
            body: body.into(),
        });
    }

    /// Pull request numbers in the merge queue, first to merge first.
    pub fn merge_queue(&self, repository: &str) -> Vec<u64> {
        let world = super::lock(&self.shared.world);
        world
            .repo(repository)
            .map(|r| r.extras.queue.clone())
            .unwrap_or_default()
    }

    /// The merge queue merges queued pull request `number`.
    pub fn complete_merge_queue(&self, repository: &str, number: u64) {
        self.must(Action::CompleteMergeQueue {
            repository: repository.into(),
            number,
        });
    }

    /// The merge queue removes queued pull request `number` for `reason`.
    pub fn remove_from_merge_queue(&self, repository: &str, number: u64, reason: &str) {
        self.must(Action::RemoveFromMergeQueue {
            repository: repository.into(),
            number,
            reason: reason.into(),
        });
    }

    /// The body of pull request `number`.
    pub fn pull_body(&self, repository: &str, number: u64) -> Option<String> {
        let world = super::lock(&self.shared.world);
        world
            .repo(repository)
            .and_then(|r| r.issues.get(&number))
            .map(|i| i.body.clone())
    }
}
