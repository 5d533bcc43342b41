//! A worker host's own copy of an execution's workspace, for hosts that do not share the
//! serving host's filesystem: the start point fetched from the serving host's run API as a git
//! bundle, built into a private directory (mode 0700) on this host, and the step's result
//! returned as a commit (a bundle of what the start lacks), retried until the serving host has
//! it. Every request carries the worker's bearer token and its claim's fencing token.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use trellis_ledger::postgres::leases::Claim;
use trellis_workspace::{
    Git, ObjectId, RemoteEnd, Repository, RunCheckpoints, force_remove_dir, remote_reference,
    start_workspace, tree_of, write_bundle,
};

use crate::dispatch::remote_workspace::{
    START_COMMIT_HEADER, WORKSPACE_SUBDIR_HEADER, decode_subdir,
};

/// The header carrying the claim's fencing token: the serving host answers only the holder.
pub const CLAIM_HEADER: &str = "trellis-claim";
/// How many times a result is offered before the execution fails.
const RESULT_ATTEMPTS: u32 = 6;
/// The first pause between offers (doubled each time).
const FIRST_PAUSE: Duration = Duration::from_millis(200);
/// Longest one transfer may take.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(300);

/// The serving host a worker host gets workspaces from: its base URL and a bearer token of
/// `trellis serve` (never printed).
#[derive(Clone)]
pub struct WorkspaceServer {
    pub base: String,
    pub token: String,
}

impl std::fmt::Debug for WorkspaceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceServer")
            .field("base", &self.base)
            .field("token", &"<hidden>")
            .finish()
    }
}

impl WorkspaceServer {
    fn url(&self, claim: &Claim, what: &str) -> String {
        format!(
            "{}/api/v1/runs/{}/executions/{}/{what}",
            self.base.trim_end_matches('/'),
            claim.run_id,
            claim.execution
        )
    }
}

/// One execution's workspace on this host, removed with everything in it when dropped.
pub(crate) struct PrivateWorkspace {
    root: PathBuf,
    repo: Repository,
    start: ObjectId,
    /// Where the execution works (the start's `subdir` in the copy).
    pub workdir: PathBuf,
}

impl Drop for PrivateWorkspace {
    fn drop(&mut self) {
        let _ = force_remove_dir(&self.root);
    }
}

fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(TRANSFER_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot start an HTTP client: {e}"))
}

/// Fetches the start point of the claimed execution into `root` (a fresh directory only this
/// user may enter).
pub(crate) async fn fetch(
    server: &WorkspaceServer,
    claim: &Claim,
    root: PathBuf,
) -> Result<PrivateWorkspace, String> {
    let _ = force_remove_dir(&root);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&root)
        .map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let answer = http_client()?
        .get(server.url(claim, "workspace"))
        .bearer_auth(&server.token)
        .header(CLAIM_HEADER, claim.fencing_token.to_string())
        .send()
        .await
        .map_err(|e| format!("cannot reach the serving host: {}", e.without_url()))?;
    let status = answer.status();
    if !status.is_success() {
        let body = answer.text().await.unwrap_or_default();
        return Err(format!(
            "the serving host refused the workspace ({status}): {body}"
        ));
    }
    let header = |name: &str| {
        answer
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let expected = header(START_COMMIT_HEADER)
        .ok_or_else(|| "the serving host named no start commit".to_owned())?;
    let subdir = header(WORKSPACE_SUBDIR_HEADER)
        .and_then(|text| decode_subdir(&text))
        .filter(|subdir| {
            subdir.is_relative() && !subdir.components().any(|c| c.as_os_str() == "..")
        })
        .ok_or_else(|| "the serving host named no directory inside the workspace".to_owned())?;
    let bundle = answer
        .bytes()
        .await
        .map_err(|e| format!("the workspace did not arrive whole: {}", e.without_url()))?;
    let file = root.join("start.bundle");
    std::fs::write(&file, &bundle).map_err(|e| format!("cannot keep the workspace: {e}"))?;
    let (run, execution) = (claim.run_id.to_string(), claim.execution);
    let work = root.join("work");
    let built = tokio::task::spawn_blocking(move || {
        let reference = remote_reference(&run, execution, RemoteEnd::Start)?;
        start_workspace(&Git::from_environment(), &work, &file, &reference)
    })
    .await
    .map_err(|_| "the checkout thread failed".to_owned())?;
    let (repo, commit) = match built {
        Ok(built) => built,
        Err(error) => {
            let _ = force_remove_dir(&root);
            return Err(format!("cannot build the workspace: {error}"));
        }
    };
    let workspace = PrivateWorkspace {
        workdir: repo.top().join(&subdir),
        root,
        repo,
        start: commit,
    };
    if workspace.start.as_str() != expected {
        return Err("the serving host sent a different start point".into());
    }
    Ok(workspace)
}

impl PrivateWorkspace {
    /// Records what the execution left as a commit of its start and returns it to the serving
    /// host: `None` when nothing changed. Offers are retried (the result is the same commit
    /// each time, so a result that arrived before a connection broke is not stored twice).
    pub(crate) async fn return_result(
        &self,
        server: &WorkspaceServer,
        claim: &Claim,
    ) -> Result<Option<String>, String> {
        let (repo, start, root) = (self.repo.clone(), self.start.clone(), self.root.clone());
        let (run, execution) = (claim.run_id.to_string(), claim.execution);
        let recorded =
            tokio::task::spawn_blocking(move || record(&repo, &start, &root, &run, execution))
                .await
                .map_err(|_| "the recording thread failed".to_owned())?
                .map_err(|e| format!("cannot record the result: {e}"))?;
        let Some((commit, file)) = recorded else {
            return Ok(None);
        };
        let bundle = std::fs::read(&file).map_err(|e| format!("cannot read the result: {e}"))?;
        let client = http_client()?;
        let mut pause = FIRST_PAUSE;
        let mut last = String::new();
        for attempt in 1..=RESULT_ATTEMPTS {
            match offer(&client, server, claim, bundle.clone()).await {
                Offered::Taken(taken) if taken == commit.as_str() => return Ok(Some(taken)),
                Offered::Taken(other) => {
                    return Err(format!("the serving host kept {other}, not {commit}"));
                }
                Offered::Refused(why) => return Err(why),
                Offered::Retry(why) => last = why,
            }
            if attempt < RESULT_ATTEMPTS {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
        Err(format!(
            "the result did not reach the serving host after {RESULT_ATTEMPTS} attempts: {last}"
        ))
    }
}

/// The result commit and its bundle in `root`, or `None` when the tree is the start's.
fn record(
    repo: &Repository,
    start: &ObjectId,
    root: &Path,
    run: &str,
    execution: u64,
) -> Result<Option<(ObjectId, PathBuf)>, trellis_workspace::WorkspaceError> {
    let reference = remote_reference(run, execution, RemoteEnd::Result)?;
    let index = root.join("result.index");
    let checkpoints = RunCheckpoints::new(repo.clone(), run, index, None)?;
    let message = "trellis: the result of a step run on a worker host";
    let result = checkpoints.record_as(&reference, Some(start), message)?;
    if result.tree == tree_of(repo, start)? {
        return Ok(None);
    }
    let file = root.join("result.bundle");
    write_bundle(repo, &reference, Some(start), &file)?;
    Ok(Some((result.commit, file)))
}

enum Offered {
    Taken(String),
    Refused(String),
    Retry(String),
}

async fn offer(
    client: &reqwest::Client,
    server: &WorkspaceServer,
    claim: &Claim,
    bundle: Vec<u8>,
) -> Offered {
    let sent = client
        .put(server.url(claim, "result"))
        .bearer_auth(&server.token)
        .header(CLAIM_HEADER, claim.fencing_token.to_string())
        .header(reqwest::header::CONTENT_TYPE, "application/x-git-bundle")
        .body(bundle)
        .send()
        .await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(e) => return Offered::Retry(e.without_url().to_string()),
    };
    let status = answer.status();
    let body = answer.text().await.unwrap_or_default();
    if status.is_success() {
        let commit = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["commit"].as_str().map(str::to_owned));
        return match commit {
            Some(commit) => Offered::Taken(commit),
            None => Offered::Retry(format!("an unreadable answer ({status})")),
        };
    }
    let why = format!("the serving host refused the result ({status}): {body}");
    // A server error or a body cut short may pass; a refusal of the claim or the result won't.
    match status {
        s if s.is_server_error() => Offered::Retry(why),
        StatusCode::BAD_REQUEST | StatusCode::REQUEST_TIMEOUT | StatusCode::TOO_MANY_REQUESTS => {
            Offered::Retry(why)
        }
        _ => Offered::Refused(why),
    }
}
