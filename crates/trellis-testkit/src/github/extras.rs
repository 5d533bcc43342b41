//! Scripting and rendering of the fake's merge-policy and CI extras (see `policy.rs`): the
//! actions that set methods, rules, protection, job logs and the merge queue, and GitHub's
//! shapes for branch protection and branch rules.

use serde_json::{Value, json};

use super::policy::{Extras, JobLog, Protection};
use super::world::{Action, Repo, World, repo_key};

/// GitHub's branch protection document.
pub(crate) fn render_protection(api_repo: &str, branch: &str, p: &Protection) -> Value {
    let url = format!("{api_repo}/branches/{branch}/protection");
    let enabled = |on: bool| json!({"enabled": on});
    let mut value = json!({
        "url": url,
        "required_linear_history": enabled(p.linear_history),
        "allow_force_pushes": enabled(false),
        "allow_deletions": enabled(false),
        "enforce_admins": {"url": format!("{url}/enforce_admins"), "enabled": false},
        "required_conversation_resolution": enabled(false),
    });
    if !p.required_checks.is_empty() {
        value["required_status_checks"] = json!({
            "url": format!("{url}/required_status_checks"),
            "strict": p.strict,
            "contexts": p.required_checks,
            "checks": p.required_checks.iter().map(|c| json!({"context": c, "app_id": null})).collect::<Vec<_>>(),
            "contexts_url": format!("{url}/required_status_checks/contexts"),
        });
    }
    if p.required_approvals > 0 {
        value["required_pull_request_reviews"] = json!({
            "url": format!("{url}/required_pull_request_reviews"),
            "dismiss_stale_reviews": false,
            "require_code_owner_reviews": false,
            "required_approving_review_count": p.required_approvals,
        });
    }
    value
}

/// The active rules of a branch as `GET /rules/branches/{branch}` lists them.
pub(crate) fn render_rules(repo: &Repo, branch: &str) -> Vec<Value> {
    let full = format!("{}/{}", repo.owner, repo.name);
    repo.extras
        .rules
        .get(branch)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, rule)| {
            let mut rule = rule.clone();
            if rule.get("parameters").is_none() && needs_parameters(&rule) {
                rule["parameters"] = json!({});
            }
            rule["ruleset_source_type"] = json!("Repository");
            rule["ruleset_source"] = json!(full);
            rule["ruleset_id"] = json!(repo.id * 100 + i as u64 + 1);
            rule
        })
        .collect()
}

fn needs_parameters(rule: &Value) -> bool {
    !matches!(
        rule.get("type").and_then(Value::as_str),
        Some("required_linear_history" | "non_fast_forward" | "deletion" | "creation")
    )
}

impl World {
    fn extras_mut(&mut self, repository: &str) -> Result<&mut Extras, String> {
        self.repos
            .get_mut(&repo_key(repository))
            .map(|r| &mut r.extras)
            .ok_or_else(|| format!("no repository {repository}"))
    }

    /// Applies the policy, log and queue actions.
    pub(crate) fn apply_extra(&mut self, action: Action) -> Result<Value, String> {
        match action {
            Action::SetMergeMethods {
                repository,
                allow_merge_commit,
                allow_squash_merge,
                allow_rebase_merge,
            } => {
                let extras = self.extras_mut(&repository)?;
                extras.allow_merge_commit = allow_merge_commit;
                extras.allow_squash_merge = allow_squash_merge;
                extras.allow_rebase_merge = allow_rebase_merge;
            }
            Action::SetBranchRules {
                repository,
                branch,
                rules,
            } => {
                if let Some(bad) = rules
                    .iter()
                    .find(|r| !r.get("type").is_some_and(Value::is_string))
                {
                    return Err(format!("rule {bad} has no \"type\""));
                }
                self.extras_mut(&repository)?.rules.insert(branch, rules);
            }
            Action::SetBranchProtection {
                repository,
                branch,
                required_checks,
                strict,
                required_approvals,
                linear_history,
                readable,
                remove,
            } => {
                let extras = self.extras_mut(&repository)?;
                if remove {
                    extras.protection.remove(&branch);
                } else {
                    extras.protection.insert(
                        branch,
                        Protection {
                            required_checks,
                            strict,
                            required_approvals,
                            linear_history,
                            readable,
                        },
                    );
                }
            }
            Action::SetJobLog {
                repository,
                sha,
                pull,
                name,
                log,
                status,
            } => {
                let sha = match (sha, pull) {
                    (Some(sha), None) => sha,
                    (None, Some(number)) => self.head_sha(&repository, number)?,
                    _ => return Err("give exactly one of sha and pull".into()),
                };
                let repo = self
                    .repo(&repository)
                    .ok_or_else(|| format!("no repository {repository}"))?;
                let id = repo
                    .check_runs
                    .iter()
                    .find(|r| r.sha == sha && r.name == name)
                    .map(|r| r.id)
                    .ok_or_else(|| format!("no check run {name} on {sha}: set it first"))?;
                self.extras_mut(&repository)?.job_logs.insert(
                    id,
                    JobLog {
                        status: status.unwrap_or(200),
                        text: log,
                    },
                );
                return Ok(json!({"id": id}));
            }
            Action::CompleteMergeQueue { repository, number } => {
                let extras = self.extras_mut(&repository)?;
                if !extras.queue.contains(&number) {
                    return Err(format!("pull request #{number} is not in the merge queue"));
                }
                extras.queue.retain(|n| *n != number);
                let (sha, at) = (self.fresh_sha(), self.now());
                let issue = self
                    .repos
                    .get_mut(&repo_key(&repository))
                    .and_then(|r| r.issues.get_mut(&number))
                    .ok_or_else(|| format!("no pull request #{number}"))?;
                issue.open = false;
                issue.updated_at = at.clone();
                if let Some(pull) = issue.pull.as_mut() {
                    pull.merged_at = Some(at);
                    pull.merge_commit_sha = Some(sha.clone());
                }
                return Ok(json!({"sha": sha}));
            }
            Action::RemoveFromMergeQueue {
                repository,
                number,
                reason,
            } => {
                let head = self.head_sha(&repository, number)?;
                let extras = self.extras_mut(&repository)?;
                if !extras.queue.contains(&number) {
                    return Err(format!("pull request #{number} is not in the merge queue"));
                }
                extras.queue.retain(|n| *n != number);
                extras.removals.insert(number, (head, reason));
            }
            Action::EditIssueComment {
                repository,
                id,
                body,
            } => {
                let at = self.now();
                let comment = self
                    .repos
                    .get_mut(&repo_key(&repository))
                    .and_then(|r| r.comments.iter_mut().find(|c| c.id == id))
                    .ok_or_else(|| format!("no comment {id} in {repository}"))?;
                comment.body = body;
                comment.updated_at = at;
            }
            other => return Err(format!("not an extra action: {other:?}")),
        }
        Ok(json!({}))
    }
}
