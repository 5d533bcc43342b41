//! Preparation before any agent starts: a graph that delivers is checked against the
//! workspace, its remote and the forge when it is submitted (branch committed and attached,
//! remote and target branch present, token declared and set, repository reachable), so a run
//! never fails for these after an hour of agent work. Also resolves `--task-from` URLs into
//! template input.

use std::future::Future;
use std::path::Path;

use serde_json::Value;
use trellis_agents::Binding;
use trellis_forge::{ForgeError, GitHub, RepoRef, TaskUrl};
use trellis_graph::GraphSpec;

use crate::delivery::{DeliveryKind, ForgeSettings, delivery_workers, git_blocking, parse_remote};
use crate::plan::RuntimePlan;
use crate::shared::admission_error::AdmissionError;

/// Token variables `--task-from` reads, in order.
const TASK_TOKEN_VARIABLES: [&str; 2] = ["GH_TOKEN", "GITHUB_TOKEN"];

fn refuse(message: String) -> AdmissionError {
    AdmissionError::Preparation(message)
}

/// Runs `future` to its end on a thread of its own (admission may be called from async code).
fn block_on<T: Send>(future: impl Future<Output = T> + Send) -> Result<T, AdmissionError> {
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map(|runtime| runtime.block_on(future))
            })
            .join()
    })
    .map_err(|_| refuse("the forge check stopped unexpectedly".to_owned()))?
    .map_err(|e| refuse(format!("cannot start the forge check: {e}")))
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn forge_refusal(error: &ForgeError) -> AdmissionError {
    refuse(error.to_string())
}

/// Checks everything the graph's delivery nodes will need; `lookup` reads the forge token
/// the run will have (a caller's value over this host's).
pub(crate) fn prepare(
    spec: &GraphSpec,
    plan: &RuntimePlan,
    workspace: &Path,
    input: &Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), AdmissionError> {
    let settings = ForgeSettings::from_env();
    for (node, worker) in delivery_workers(spec) {
        let Some(kind) = DeliveryKind::of(worker.as_str()) else {
            continue;
        };
        let Some(Binding::GitDelivery(binding)) = plan.nodes.get(&node) else {
            continue;
        };
        let variable = crate::delivery::token_variable(binding);
        if kind.uses_forge() && lookup(&variable).is_none_or(|v| v.trim().is_empty()) {
            return Err(refuse(format!(
                "delivery node {node} talks to GitHub with the token in ${variable}, which is \
                 not set: export a token that can {} before the run",
                if kind == DeliveryKind::Comment {
                    "comment on the issue or pull request"
                } else {
                    "push and open pull requests"
                }
            )));
        }
        if kind.pushes() {
            let remote = binding.remote.as_deref().unwrap_or("origin");
            let repo = check_workspace(workspace, remote, kind)?;
            if let Some((host, repo)) = repo {
                check_repository(&settings, &host, &repo, &variable, lookup)?;
            }
        } else if let Some(url) = input.get("url").and_then(Value::as_str) {
            let task = TaskUrl::parse(url).map_err(|e| forge_refusal(&e))?;
            check_repository(&settings, &task.host, &task.repository, &variable, lookup)?;
        }
    }
    Ok(())
}

/// The workspace is a git repository on an attached branch with nothing uncommitted, its
/// remote exists and (for pull requests) holds the target branch; answers the GitHub
/// repository the remote names, for deliveries that use the forge.
fn check_workspace(
    workspace: &Path,
    remote: &str,
    kind: DeliveryKind,
) -> Result<Option<(String, RepoRef)>, AdmissionError> {
    let shown = workspace.display();
    let git = |args: &[&str]| git_blocking(workspace, args);
    git(&["rev-parse", "--verify", "HEAD^{commit}"]).map_err(|_| {
        refuse(format!(
            "delivery needs a git repository with at least one commit, and {shown} is not one"
        ))
    })?;
    let branch = git(&["symbolic-ref", "--quiet", "--short", "HEAD"]).map_err(|_| {
        refuse(format!(
            "HEAD is detached in {shown}: check out the branch the change is for (delivery \
             pushes a run branch made from it)"
        ))
    })?;
    let changes = git(&["status", "--porcelain"])
        .map_err(|e| refuse(format!("cannot read the state of {shown}: {e}")))?;
    if !changes.is_empty() {
        let count = changes.lines().count();
        return Err(refuse(format!(
            "{shown} has {count} uncommitted change(s): commit or stash them first, so the \
             delivered change holds only the run's work"
        )));
    }
    let url = git(&["config", "--get", &format!("remote.{remote}.url")]).map_err(|_| {
        refuse(format!(
            "{shown} has no git remote {remote:?}: add the repository to deliver to (git remote \
             add {remote} URL)"
        ))
    })?;
    if !kind.uses_forge() {
        return Ok(None);
    }
    let heads = git(&[
        "ls-remote",
        "--heads",
        remote,
        &format!("refs/heads/{branch}"),
    ])
    .map_err(|e| refuse(format!("cannot reach the remote {remote}: {e}")))?;
    if heads.is_empty() {
        return Err(refuse(format!(
            "the remote {remote} has no branch {branch}: push it first (the pull request \
             targets it)"
        )));
    }
    let named = parse_remote(&crate::delivery::without_userinfo(&url)).ok_or_else(|| {
        refuse(format!(
            "the remote {remote} ({}) does not name a GitHub repository \
             (https://HOST/OWNER/REPO or git@HOST:OWNER/REPO)",
            crate::delivery::without_userinfo(&url)
        ))
    })?;
    Ok(Some(named))
}

/// The repository can be read with the declared token.
fn check_repository(
    settings: &ForgeSettings,
    host: &str,
    repo: &RepoRef,
    variable: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), AdmissionError> {
    let github = settings
        .client(host, variable, lookup)
        .map_err(|e| forge_refusal(&e))?;
    block_on(async { github.repository(repo).await.map(|_| ()) })?.map_err(|e| forge_refusal(&e))
}

fn task_client(url: &str, settings: &ForgeSettings) -> Result<GitHub, AdmissionError> {
    let task = TaskUrl::parse(url).map_err(|e| AdmissionError::TaskFrom(e.to_string()))?;
    let variable = TASK_TOKEN_VARIABLES
        .iter()
        .find(|v| env_lookup(v).is_some_and(|value| !value.trim().is_empty()))
        .ok_or_else(|| {
            AdmissionError::TaskFrom(
                "--task-from reads the issue or pull request with a GitHub token: export \
                 GH_TOKEN (or GITHUB_TOKEN)"
                    .to_owned(),
            )
        })?;
    settings
        .client(&task.host, variable, env_lookup)
        .map_err(|e| AdmissionError::TaskFrom(e.to_string()))
}

/// Resolves an issue or pull request URL into the input of the review template `template`.
pub(crate) fn task_from(url: &str, template: &str) -> Result<Value, AdmissionError> {
    let settings = ForgeSettings::from_env();
    let github = task_client(url, &settings)?;
    let context =
        block_on(github.resolve_task(url))?.map_err(|e| AdmissionError::TaskFrom(e.to_string()))?;
    context
        .input_for_template(template, None)
        .map_err(|e| AdmissionError::TaskFrom(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_url_without_a_token_is_refused_in_one_line() {
        // The token variables may be set in the environment of whoever runs the tests; the
        // URL below is refused before any token is looked at.
        let error = task_from("https://example.com/not-a-task", "issue-review").unwrap_err();
        assert_eq!(error.code(), "admission.task_from");
        assert!(!error.to_string().contains('\n'), "{error}");
    }
}
