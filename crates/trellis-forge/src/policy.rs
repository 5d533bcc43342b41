//! A branch's merge policy read through the REST API: the rules of rulesets that apply to it
//! (`GET …/rules/branches/{branch}`), classic branch protection where the token may read it
//! (`GET …/branches/{branch}/protection`), and the repository's allowed merge methods
//! (`GET /repos/{owner}/{repo}`). Merging and feedback then honour required checks, allowed
//! methods, linear history and merge queues.

use std::collections::BTreeSet;

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::Op;
use crate::pulls::encode_path;
use crate::{ForgeError, GitHub, RepoRef};

/// How GitHub should merge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeMethod {
    #[default]
    Merge,
    Squash,
    Rebase,
}

impl MergeMethod {
    /// GitHub's name of the method (`merge`, `squash`, `rebase`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Merge => "merge",
            Self::Squash => "squash",
            Self::Rebase => "rebase",
        }
    }

    /// Reads GitHub's name of a method, in any case (rulesets say `MERGE`, `squash`…).
    pub fn parse(name: &str) -> Option<MergeMethod> {
        match name.to_ascii_lowercase().as_str() {
            "merge" => Some(Self::Merge),
            "squash" => Some(Self::Squash),
            "rebase" => Some(Self::Rebase),
            _ => None,
        }
    }
}

/// What Trellis could read of classic branch protection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtectionAccess {
    /// Read: its rules are part of the policy.
    Read,
    /// The branch is not protected (404).
    None,
    /// The token may not read it (403): the policy holds the rulesets' rules only.
    Forbidden,
}

/// A merge queue rule on the branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergeQueueRule {
    /// The method the queue merges with, when the rule names one.
    pub merge_method: Option<MergeMethod>,
}

/// The merge policy of one base branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergePolicy {
    pub branch: String,
    /// Check and status names that must pass (rulesets and branch protection together);
    /// empty when nothing names any, and then every check counts.
    pub required_checks: Vec<String>,
    /// The head must be up to date with the base before merging.
    pub strict_checks: bool,
    pub required_approvals: u64,
    pub linear_history: bool,
    pub merge_queue: Option<MergeQueueRule>,
    /// The methods a merge may use: the repository's settings, narrowed by a ruleset's
    /// `allowed_merge_methods` and by linear history (no merge commits); in GitHub's order.
    pub allowed_methods: Vec<MergeMethod>,
    pub protection: ProtectionAccess,
    /// What could not be read, in words (e.g. branch protection without permission).
    pub notes: Vec<String>,
}

impl MergePolicy {
    /// Whether a check or status of this name blocks: a required one when the policy names
    /// any, every one otherwise.
    pub fn check_counts(&self, name: &str) -> bool {
        self.required_checks.is_empty() || self.required_checks.iter().any(|c| c == name)
    }

    /// Required checks that nothing has reported on the commit yet (`seen`: every check run
    /// and status name on it); GitHub waits for them ("Expected").
    pub fn unreported_checks(&self, seen: &BTreeSet<String>) -> Vec<String> {
        self.required_checks
            .iter()
            .filter(|c| !seen.contains(*c))
            .cloned()
            .collect()
    }

    /// The method to merge with: `requested` when allowed, else the first allowed one —
    /// squash or rebase under linear history, where merge commits are not allowed. `None`
    /// when no method is allowed.
    pub fn choose_method(&self, requested: MergeMethod) -> Option<MergeMethod> {
        if self.allowed_methods.contains(&requested) {
            return Some(requested);
        }
        self.allowed_methods.first().copied()
    }
}

/// The repository's merge settings. GitHub includes them only for tokens that may push; an
/// absent one is taken as allowed (GitHub's default) and the merge call stays the judge.
#[derive(Debug, Deserialize)]
struct MergeSettings {
    #[serde(default)]
    allow_merge_commit: Option<bool>,
    #[serde(default)]
    allow_squash_merge: Option<bool>,
    #[serde(default)]
    allow_rebase_merge: Option<bool>,
}

fn texts<'v>(value: &'v Value, pointer: &str) -> impl Iterator<Item = &'v str> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            v.as_str()
                .or_else(|| v.get("context").and_then(Value::as_str))
        })
}

impl GitHub {
    /// The active ruleset rules that apply to `branch` (every level: repository, organization),
    /// as GitHub answers them: `{"type": …, "parameters": {…}, "ruleset_id": …}`.
    pub async fn branch_rules(
        &self,
        repo: &RepoRef,
        branch: &str,
    ) -> Result<Vec<Value>, ForgeError> {
        let op = Op {
            repo,
            action: "read the branch's rules",
            resource: Some(format!("rules of branch {branch}")),
        };
        let path = format!("{}/rules/branches/{}", repo.api_path(), encode_path(branch));
        self.call_all(&path, &[], &op).await
    }

    /// The merge policy of base branch `branch` (see the module text). Branch protection the
    /// token may not read (403) leaves the rulesets' rules; rules an old GitHub Enterprise
    /// Server does not serve (404) leave branch protection.
    pub async fn merge_policy(
        &self,
        repo: &RepoRef,
        branch: &str,
    ) -> Result<MergePolicy, ForgeError> {
        let repo_op = Op {
            repo,
            action: "read the repository",
            resource: None,
        };
        let settings: MergeSettings = self
            .call(Method::GET, &repo.api_path(), &[], None, &repo_op)
            .await?;
        let mut policy = MergePolicy {
            branch: branch.to_owned(),
            required_checks: Vec::new(),
            strict_checks: false,
            required_approvals: 0,
            linear_history: false,
            merge_queue: None,
            allowed_methods: Vec::new(),
            protection: ProtectionAccess::None,
            notes: Vec::new(),
        };
        let mut required: BTreeSet<String> = BTreeSet::new();
        let mut ruleset_methods: Option<BTreeSet<MergeMethod>> = None;
        match self.branch_rules(repo, branch).await {
            Ok(rules) => {
                for rule in &rules {
                    let kind = rule.get("type").and_then(Value::as_str).unwrap_or_default();
                    let parameters = rule.get("parameters").cloned().unwrap_or(Value::Null);
                    match kind {
                        "required_status_checks" => {
                            required.extend(
                                texts(&parameters, "/required_status_checks").map(str::to_owned),
                            );
                            policy.strict_checks |= parameters
                                .get("strict_required_status_checks_policy")
                                .and_then(Value::as_bool)
                                .unwrap_or(false);
                        }
                        "pull_request" => {
                            let count = parameters
                                .get("required_approving_review_count")
                                .and_then(Value::as_u64)
                                .unwrap_or(0);
                            policy.required_approvals = policy.required_approvals.max(count);
                            if parameters.get("allowed_merge_methods").is_some() {
                                let methods: BTreeSet<MergeMethod> =
                                    texts(&parameters, "/allowed_merge_methods")
                                        .filter_map(MergeMethod::parse)
                                        .collect();
                                // Several rulesets: a method must pass all of them.
                                ruleset_methods = Some(match ruleset_methods {
                                    Some(before) => {
                                        before.intersection(&methods).copied().collect()
                                    }
                                    None => methods,
                                });
                            }
                        }
                        "required_linear_history" => policy.linear_history = true,
                        "merge_queue" => {
                            policy.merge_queue = Some(MergeQueueRule {
                                merge_method: parameters
                                    .get("merge_method")
                                    .and_then(Value::as_str)
                                    .and_then(MergeMethod::parse),
                            });
                        }
                        _ => {}
                    }
                }
            }
            Err(ForgeError::NotFound { .. }) => policy
                .notes
                .push("GitHub serves no rulesets here (404): branch protection only".into()),
            Err(ForgeError::Forbidden { message, .. }) => policy.notes.push(format!(
                "the branch's rulesets are not readable (403: {message})"
            )),
            Err(error) => return Err(error),
        }
        self.read_protection(repo, branch, &mut policy, &mut required)
            .await?;
        policy.required_checks = required.into_iter().collect();
        let allowed = |flag: Option<bool>, method: MergeMethod| {
            flag.unwrap_or(true)
                && ruleset_methods.as_ref().is_none_or(|m| m.contains(&method))
                && !(policy.linear_history && method == MergeMethod::Merge)
        };
        policy.allowed_methods = [
            (settings.allow_merge_commit, MergeMethod::Merge),
            (settings.allow_squash_merge, MergeMethod::Squash),
            (settings.allow_rebase_merge, MergeMethod::Rebase),
        ]
        .into_iter()
        .filter(|(flag, method)| allowed(*flag, *method))
        .map(|(_, method)| method)
        .collect();
        Ok(policy)
    }

    /// Adds classic branch protection to `policy` when it can be read.
    async fn read_protection(
        &self,
        repo: &RepoRef,
        branch: &str,
        policy: &mut MergePolicy,
        required: &mut BTreeSet<String>,
    ) -> Result<(), ForgeError> {
        let op = Op {
            repo,
            action: "read branch protection",
            resource: Some(format!("protection of branch {branch}")),
        };
        let path = format!(
            "{}/branches/{}/protection",
            repo.api_path(),
            encode_path(branch)
        );
        let protection: Value = match self.call(Method::GET, &path, &[], None, &op).await {
            Ok(protection) => protection,
            Err(ForgeError::NotFound { .. }) => {
                policy.protection = ProtectionAccess::None;
                return Ok(());
            }
            Err(ForgeError::Forbidden { .. }) => {
                policy.protection = ProtectionAccess::Forbidden;
                policy.notes.push(format!(
                    "branch protection of {branch} is not readable with this token (403): \
                     the policy holds the rulesets' rules only"
                ));
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        policy.protection = ProtectionAccess::Read;
        required.extend(texts(&protection, "/required_status_checks/contexts").map(str::to_owned));
        required.extend(texts(&protection, "/required_status_checks/checks").map(str::to_owned));
        policy.strict_checks |= protection
            .pointer("/required_status_checks/strict")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let approvals = protection
            .pointer("/required_pull_request_reviews/required_approving_review_count")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        policy.required_approvals = policy.required_approvals.max(approvals);
        policy.linear_history |= protection
            .pointer("/required_linear_history/enabled")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allowed: &[MergeMethod]) -> MergePolicy {
        MergePolicy {
            branch: "main".into(),
            required_checks: vec!["test".into()],
            strict_checks: false,
            required_approvals: 0,
            linear_history: false,
            merge_queue: None,
            allowed_methods: allowed.to_vec(),
            protection: ProtectionAccess::None,
            notes: Vec::new(),
        }
    }

    #[test]
    fn the_requested_method_wins_when_allowed() {
        use MergeMethod::*;
        assert_eq!(policy(&[Merge, Squash]).choose_method(Squash), Some(Squash));
        assert_eq!(policy(&[Rebase]).choose_method(Merge), Some(Rebase));
        assert_eq!(policy(&[]).choose_method(Merge), None);
        assert!(policy(&[]).check_counts("test") && !policy(&[]).check_counts("lint"));
        assert_eq!(MergeMethod::parse("SQUASH"), Some(Squash));
    }
}
