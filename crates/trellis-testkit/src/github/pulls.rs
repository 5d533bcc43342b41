//! The pull-request endpoints of the fake GitHub: list (by state, head, base), create, get,
//! update and merge, with GitHub's refusals.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::answer::{Answer, fail, invalid, not_found, ok, paged};
use super::render::Links;
use super::world::{Repo, World, is_pull, repo, repo_key};

/// Whether reviews or checks hold a pull request back (GitHub's `blocked`): every check, or
/// only the required ones when the base branch's rules or protection name any.
fn blockers(repo: &Repo, number: u64, head_sha: &str, base: &str) -> Vec<String> {
    let policy = repo.extras.policy(base);
    let mut latest: BTreeMap<&str, &str> = BTreeMap::new();
    for review in repo.reviews.iter().filter(|r| r.number == number) {
        if review.state != "COMMENTED" {
            latest.insert(&review.author, &review.state);
        }
    }
    let mut found: Vec<String> = latest
        .iter()
        .filter(|(_, state)| **state == "CHANGES_REQUESTED")
        .map(|(author, _)| format!("Changes requested by {author}."))
        .collect();
    let runs = repo.runs_on(head_sha);
    for run in runs.iter().filter(|r| policy.counts(&r.name)) {
        let green = run.status == "completed"
            && matches!(
                run.conclusion.as_deref(),
                Some("success" | "neutral" | "skipped")
            );
        if !green {
            found.push(format!(
                "Required status check \"{}\" is not green.",
                run.name
            ));
        }
    }
    let statuses: Vec<_> = repo.statuses.iter().filter(|s| s.sha == head_sha).collect();
    for name in policy.required.iter().flatten() {
        let reported =
            runs.iter().any(|r| &r.name == name) || statuses.iter().any(|s| &s.context == name);
        if !reported {
            found.push(format!("Required status check \"{name}\" is expected."));
        }
    }
    for status in statuses.iter().filter(|s| policy.counts(&s.context)) {
        if status.state != "success" {
            found.push(format!(
                "Required status check \"{}\" is not green.",
                status.context
            ));
        }
    }
    found
}

fn render_pull(world: &World, links: &Links, full: &str, number: u64) -> Option<Value> {
    let repo = repo(world, full);
    let issue = repo.issues.get(&number)?;
    let pull = issue.pull.as_ref()?;
    let head_repo = world.repo(&pull.head_repository);
    let blocked = !blockers(repo, number, &pull.head_sha, &pull.base_ref).is_empty();
    Some(links.pull(repo, head_repo, issue, pull, blocked))
}

/// Refreshes the head, applies `change` (which may refuse with an answer), renders the result.
pub(crate) fn with_pull(
    world: &mut World,
    links: &Links,
    full: &str,
    number: u64,
    change: impl FnOnce(&mut World, u64) -> Option<Answer>,
) -> Answer {
    if !is_pull(world, full, number) {
        return not_found();
    }
    world.refresh_head(full, number);
    if let Some(refusal) = change(world, number) {
        return refusal;
    }
    render_pull(world, links, full, number).map_or_else(not_found, ok)
}

pub(crate) fn list_pulls(
    world: &mut World,
    links: &Links,
    full: &str,
    query: &BTreeMap<String, String>,
) -> Answer {
    let numbers: Vec<u64> = repo(world, full)
        .issues
        .values()
        .filter(|i| i.pull.is_some())
        .map(|i| i.number)
        .collect();
    for &n in &numbers {
        world.refresh_head(full, n);
    }
    let state = query.get("state").map_or("open", String::as_str);
    let repo = repo(world, full);
    let head = query.get("head");
    let base = query.get("base");
    let mut items = Vec::new();
    // Newest first, GitHub's default order.
    for issue in repo.issues.values().rev() {
        let Some(pull) = &issue.pull else { continue };
        let state_matches = match state {
            "all" => true,
            "closed" => !issue.open,
            _ => issue.open,
        };
        let head_owner = pull.head_repository.split_once('/').map_or("", |(o, _)| o);
        let head_matches = head.is_none_or(|h| {
            h.eq_ignore_ascii_case(&format!("{head_owner}:{}", pull.head_ref))
                || h == &pull.head_ref
        });
        let base_matches = base.is_none_or(|b| b == &pull.base_ref);
        if state_matches && head_matches && base_matches {
            let head_repo = world.repo(&pull.head_repository);
            items.push(links.pull_simple(repo, head_repo, issue, pull));
        }
    }
    paged(items, query)
}

pub(crate) fn create_pull(world: &mut World, links: &Links, full: &str, body: &Value) -> Answer {
    let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_owned);
    let (Some(title), Some(head), Some(base)) = (text("title"), text("head"), text("base")) else {
        return invalid("title", "missing_field", None);
    };
    let repo_name = repo(world, full).name.clone();
    let (head_repository, head_ref) = match head.split_once(':') {
        Some((owner, branch)) => (format!("{owner}/{repo_name}"), branch.to_owned()),
        None => (full.to_owned(), head.clone()),
    };
    let head_owner = head_repository
        .split_once('/')
        .map_or("", |(o, _)| o)
        .to_owned();
    let duplicate = repo(world, full).issues.values().any(|i| {
        i.open
            && i.pull.as_ref().is_some_and(|p| {
                p.head_ref == head_ref
                    && p.base_ref == base
                    && p.head_repository.eq_ignore_ascii_case(&head_repository)
            })
    });
    if duplicate {
        let message = format!("A pull request already exists for {head_owner}:{head_ref}.");
        return invalid("head", "custom", Some(&message));
    }
    let draft = body.get("draft").and_then(Value::as_bool).unwrap_or(false);
    let Ok(pull) = world.new_pull(full, &head_repository, head_ref, base, draft) else {
        return invalid("head", "invalid", None);
    };
    let text_body = text("body").unwrap_or_default();
    match world.open_issue(
        full,
        title,
        text_body,
        Vec::new(),
        "trellis-bot[bot]".into(),
        Some(pull),
    ) {
        Ok(number) => Answer {
            status: StatusCode::CREATED,
            ..with_pull(world, links, full, number, |_, _| None)
        },
        Err(_) => not_found(),
    }
}

pub(crate) fn update_pull(
    world: &mut World,
    links: &Links,
    full: &str,
    number: u64,
    body: &Value,
) -> Answer {
    with_pull(world, links, full, number, |world, number| {
        let base = body.get("base").and_then(Value::as_str).map(str::to_owned);
        let base_sha = match &base {
            Some(base) => match world.branch_sha(full, base) {
                Some(sha) => Some(sha),
                None => return Some(invalid("base", "invalid", None)),
            },
            None => None,
        };
        let at = world.now();
        let repo = world.repos.get_mut(&repo_key(full))?;
        let issue = repo.issues.get_mut(&number)?;
        if let Some(title) = body.get("title").and_then(Value::as_str) {
            issue.title = title.to_owned();
        }
        if let Some(text) = body.get("body").and_then(Value::as_str) {
            issue.body = text.to_owned();
        }
        match body.get("state").and_then(Value::as_str) {
            Some("closed") => issue.open = false,
            Some("open") => issue.open = true,
            _ => {}
        }
        if let (Some(base), Some(sha), Some(pull)) = (base, base_sha, issue.pull.as_mut()) {
            pull.base_ref = base;
            pull.base_sha = sha;
        }
        issue.updated_at = at;
        None
    })
}

pub(crate) fn merge_pull(world: &mut World, full: &str, number: u64, body: &Value) -> Answer {
    if !is_pull(world, full, number) {
        return not_found();
    }
    world.refresh_head(full, number);
    let repo = repo(world, full);
    let Some(issue) = repo.issues.get(&number) else {
        return not_found();
    };
    let Some(pull) = &issue.pull else {
        return not_found();
    };
    let not_mergeable = fail(
        StatusCode::METHOD_NOT_ALLOWED,
        "Pull Request is not mergeable",
    );
    if !issue.open || pull.merged() || pull.mergeable != Some(true) {
        return not_mergeable;
    }
    if pull.draft {
        return fail(
            StatusCode::METHOD_NOT_ALLOWED,
            "Pull Request is still a draft",
        );
    }
    if let Some(sha) = body.get("sha").and_then(Value::as_str)
        && sha != pull.head_sha
    {
        return fail(
            StatusCode::CONFLICT,
            "Head branch was modified. Review and try the merge again.",
        );
    }
    let policy = repo.extras.policy(&pull.base_ref);
    if policy.merge_queue {
        return fail(
            StatusCode::METHOD_NOT_ALLOWED,
            "Repository rule violations found\n\nChanges must be made through the merge queue",
        );
    }
    if policy.strict && !contains_base(world, full, &pull.base_ref, &pull.head_sha) {
        return fail(
            StatusCode::METHOD_NOT_ALLOWED,
            "Repository rule violations found\n\nHead branch is not up to date with the base \
             branch.",
        );
    }
    let repo = super::world::repo(world, full);
    let blocking = blockers(repo, number, &pull.head_sha, &pull.base_ref);
    if let Some(first) = blocking.first() {
        return fail(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("Repository rule violations found\n\n{first}"),
        );
    }
    let method = body
        .get("merge_method")
        .and_then(Value::as_str)
        .unwrap_or("merge");
    if !policy.methods.contains(&method) {
        let message = match method {
            "merge" if policy.linear_history => {
                "Repository rule violations found\n\nThis branch must not contain merge commits."
            }
            "merge" => "Merge commits are not allowed on this repository.",
            "squash" => "Squash merges are not allowed on this repository.",
            "rebase" => "Rebase merges are not allowed on this repository.",
            _ => return invalid("merge_method", "invalid", None),
        };
        return fail(StatusCode::METHOD_NOT_ALLOWED, message);
    }
    let sha = world.fresh_sha();
    let at = world.now();
    let Some(issue) = world
        .repos
        .get_mut(&repo_key(full))
        .and_then(|r| r.issues.get_mut(&number))
    else {
        return not_found();
    };
    issue.open = false;
    issue.updated_at = at.clone();
    if let Some(pull) = issue.pull.as_mut() {
        pull.merged_at = Some(at);
        pull.merge_commit_sha = Some(sha.clone());
    }
    ok(json!({"sha": sha, "merged": true, "message": "Pull Request successfully merged"}))
}

/// Whether `head` contains the tip of `base` (read from the repository's git directory; a
/// repository without one is taken to be up to date).
fn contains_base(world: &World, full: &str, base: &str, head: &str) -> bool {
    let repo = repo(world, full);
    let (Some(git_dir), Some(tip)) = (repo.git_dir.as_ref(), world.branch_sha(full, base)) else {
        return true;
    };
    std::process::Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["merge-base", "--is-ancestor", &tip, head])
        .status()
        .is_ok_and(|status| status.success())
}
