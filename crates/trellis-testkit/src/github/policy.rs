//! The fake's merge-policy and CI state of a repository: allowed merge methods, ruleset rules
//! and branch protection per branch, GitHub Actions job logs, the merge queue — and the
//! policy the merge endpoint enforces from them.

use std::collections::BTreeMap;

use serde_json::Value;

/// Classic branch protection of one branch.
#[derive(Debug, Clone)]
pub(crate) struct Protection {
    pub required_checks: Vec<String>,
    pub strict: bool,
    pub required_approvals: u64,
    pub linear_history: bool,
    /// False: the token may not read it (GitHub's 403 without admin permission).
    pub readable: bool,
}

/// A job log: the status the logs endpoint answers (200, or 403/404/410) and the text.
#[derive(Debug, Clone)]
pub(crate) struct JobLog {
    pub status: u16,
    pub text: String,
}

#[derive(Debug)]
pub(crate) struct Extras {
    pub allow_merge_commit: bool,
    pub allow_squash_merge: bool,
    pub allow_rebase_merge: bool,
    /// Ruleset rules per branch, as `{"type", "parameters"}` objects.
    pub rules: BTreeMap<String, Vec<Value>>,
    pub protection: BTreeMap<String, Protection>,
    /// Logs of Actions jobs, by check run id (the job id).
    pub job_logs: BTreeMap<u64, JobLog>,
    /// Pull request numbers in the merge queue, first to merge first.
    pub queue: Vec<u64>,
    /// The last removal from the queue per pull request: head then, reason.
    pub removals: BTreeMap<u64, (String, String)>,
}

impl Default for Extras {
    fn default() -> Extras {
        Extras {
            allow_merge_commit: true,
            allow_squash_merge: true,
            allow_rebase_merge: true,
            rules: BTreeMap::new(),
            protection: BTreeMap::new(),
            job_logs: BTreeMap::new(),
            queue: Vec::new(),
            removals: BTreeMap::new(),
        }
    }
}

/// What the fake enforces when merging into a branch.
pub(crate) struct BranchPolicy {
    /// `None`: nothing names required checks, so every check blocks (the fake's default).
    pub required: Option<Vec<String>>,
    pub methods: Vec<&'static str>,
    pub linear_history: bool,
    pub merge_queue: bool,
    /// Required checks are "strict": the head must contain the base branch's tip.
    pub strict: bool,
}

impl Extras {
    fn rules_of<'a>(&'a self, branch: &str, kind: &'a str) -> impl Iterator<Item = &'a Value> {
        self.rules
            .get(branch)
            .into_iter()
            .flatten()
            .filter(move |r| r.get("type").and_then(Value::as_str) == Some(kind))
    }

    pub fn policy(&self, branch: &str) -> BranchPolicy {
        let protection = self.protection.get(branch);
        let mut required: Vec<String> = protection
            .map(|p| p.required_checks.clone())
            .unwrap_or_default();
        for rule in self.rules_of(branch, "required_status_checks") {
            let checks = rule.pointer("/parameters/required_status_checks");
            for check in checks.and_then(Value::as_array).into_iter().flatten() {
                if let Some(context) = check.get("context").and_then(Value::as_str) {
                    required.push(context.to_owned());
                }
            }
        }
        let linear_history = protection.is_some_and(|p| p.linear_history)
            || self
                .rules_of(branch, "required_linear_history")
                .next()
                .is_some();
        let ruleset_methods: Option<Vec<String>> = self
            .rules_of(branch, "pull_request")
            .filter_map(|r| r.pointer("/parameters/allowed_merge_methods"))
            .filter_map(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .next();
        let methods = [
            ("merge", self.allow_merge_commit),
            ("squash", self.allow_squash_merge),
            ("rebase", self.allow_rebase_merge),
        ]
        .into_iter()
        .filter(|(method, allowed)| {
            *allowed
                && ruleset_methods
                    .as_ref()
                    .is_none_or(|m| m.iter().any(|x| x.eq_ignore_ascii_case(method)))
                && !(linear_history && *method == "merge")
        })
        .map(|(method, _)| method)
        .collect();
        let names_required = protection.is_some_and(|p| !p.required_checks.is_empty())
            || self
                .rules_of(branch, "required_status_checks")
                .next()
                .is_some();
        let strict = protection.is_some_and(|p| p.strict)
            || self.rules_of(branch, "required_status_checks").any(|r| {
                r.pointer("/parameters/strict_required_status_checks_policy")
                    .and_then(Value::as_bool)
                    == Some(true)
            });
        BranchPolicy {
            strict,
            required: names_required.then_some(required),
            methods,
            linear_history,
            merge_queue: self.rules_of(branch, "merge_queue").next().is_some(),
        }
    }
}

impl BranchPolicy {
    pub fn counts(&self, name: &str) -> bool {
        self.required
            .as_ref()
            .is_none_or(|r| r.iter().any(|c| c == name))
    }
}
