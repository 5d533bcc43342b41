//! The git half of delivery: reading where a run started, committing the workspace changes and
//! pushing them as the run branch `trellis/<short lineage id>`, always through
//! `trellis-process`. The commit is built in a private index and recorded only under
//! `refs/trellis/deliveries/`: the user's HEAD, branches and index are never touched.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_agents::ExecutionRequest;
use trellis_agents::exec::human_duration;
use trellis_graph::WorkerErrorCode;
use trellis_process::{
    ProcessEnd, ProcessLimits, ProcessObserver, ProcessSpec, Redactor, Stream, run_blocking,
    run_process,
};

/// Where the run started: the revision delivery must build on and the branch it targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRevision {
    pub branch: String,
    pub revision: String,
}

/// Commit identity used for delivery commits.
const AUTHOR_NAME: &str = "Trellis";
const AUTHOR_EMAIL: &str = "delivery@trellis.invalid";
/// Longest a single git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(300);

/// The run branch name: `trellis/` and the first 12 characters of the run id's hex digits.
/// Delivery passes the lineage's first run id, so a resumed run pushes the same branch.
pub fn run_branch(run_id: &str) -> String {
    let short: String = run_id
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(12)
        .collect();
    format!("trellis/{short}")
}

/// Longest a git call made while a run is submitted may take.
const SOURCE_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads the workspace's current branch and revision; `None` outside a git repository.
pub fn read_source(workspace: &Path) -> Option<SourceRevision> {
    let revision = git_blocking(workspace, &["rev-parse", "--verify", "HEAD^{commit}"]).ok()?;
    let branch = git_blocking(workspace, &["symbolic-ref", "--quiet", "--short", "HEAD"])
        .unwrap_or_default();
    Some(SourceRevision { branch, revision })
}

/// Runs git in `workspace` while a run is admitted or submitted: its trimmed stdout, or its
/// failure with the last stderr lines.
pub(crate) fn git_blocking(workspace: &Path, args: &[&str]) -> Result<String, String> {
    let env: Vec<(String, String)> = ["PATH", "HOME"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
        .chain([("GIT_TERMINAL_PROMPT".to_owned(), "0".to_owned())])
        .collect();
    let mut stderr = StderrTail::default();
    let report = run_blocking(
        &git_spec(workspace, &env, args, Redactor::default()),
        &git_limits(SOURCE_TIMEOUT),
        &|| false,
        &mut |stream, line| stderr.line(stream, line),
    );
    if report.end.success() {
        Ok(String::from_utf8_lossy(&report.stdout).trim().to_owned())
    } else {
        let tail = Vec::from(stderr.0).join(" ");
        Err(format!("{} {}", report.end.describe(), tail.trim())
            .trim()
            .to_owned())
    }
}

fn git_spec(
    workspace: &Path,
    env: &[(String, String)],
    args: &[&str],
    redactor: Redactor,
) -> ProcessSpec {
    ProcessSpec {
        program: "git".into(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        cwd: workspace.to_path_buf(),
        env: env.to_vec(),
        stdin: Vec::new(),
        redactor,
    }
}

fn git_limits(timeout: Duration) -> ProcessLimits {
    ProcessLimits {
        deadline: Some(timeout),
        max_stdout_bytes: GIT_OUTPUT_BYTES,
        ..ProcessLimits::default()
    }
}

/// Most bytes of a git command's stdout (and kept stderr) read.
const GIT_OUTPUT_BYTES: usize = 1024 * 1024;
/// Stderr lines of a failed git command kept for its error message.
const GIT_STDERR_LINES: usize = 20;

/// Keeps the last stderr lines of a git command.
#[derive(Default)]
struct StderrTail(std::collections::VecDeque<String>);

impl ProcessObserver for StderrTail {
    fn line(&mut self, stream: Stream, line: &str) {
        if stream == Stream::Stderr {
            if self.0.len() == GIT_STDERR_LINES {
                self.0.pop_front();
            }
            self.0.push_back(line.to_owned());
        }
    }
}

/// A failed git step: `crash` for broken git, `malformed` when there is nothing to deliver.
pub(super) struct DeliveryFailure {
    pub code: WorkerErrorCode,
    pub message: String,
}

pub(super) fn crash(message: String) -> DeliveryFailure {
    DeliveryFailure {
        code: WorkerErrorCode::Crash,
        message,
    }
}

pub(super) struct Git<'a> {
    pub workspace: &'a Path,
    pub env: Vec<(String, String)>,
    pub redactor: Redactor,
    pub cancel: &'a CancellationToken,
}

impl Git<'_> {
    /// Runs git to its end (or its timeout, or cancellation); its stdout and stderr tail.
    pub async fn call(
        &self,
        args: &[&str],
    ) -> Result<(ProcessEnd, String, String), DeliveryFailure> {
        self.call_with(args, None).await
    }

    /// As [`Git::call`], with `GIT_INDEX_FILE` pointing at `index` when one is given.
    pub async fn call_with(
        &self,
        args: &[&str],
        index: Option<&Path>,
    ) -> Result<(ProcessEnd, String, String), DeliveryFailure> {
        let mut env = self.env.clone();
        if let Some(index) = index {
            env.push((
                "GIT_INDEX_FILE".into(),
                index.to_string_lossy().into_owned(),
            ));
        }
        let spec = git_spec(self.workspace, &env, args, self.redactor.clone());
        let mut stderr = StderrTail::default();
        let report = run_process(&spec, &git_limits(GIT_TIMEOUT), self.cancel, &mut stderr).await;
        let what = format!("git {}", args.first().copied().unwrap_or_default());
        match report.end {
            ProcessEnd::Cancelled => Err(DeliveryFailure {
                code: WorkerErrorCode::Refusal,
                message: "delivery cancelled".into(),
            }),
            ProcessEnd::DeadlineExceeded => Err(crash(format!(
                "{what} timed out after {}",
                human_duration(GIT_TIMEOUT)
            ))),
            ProcessEnd::SpawnFailed(message) => Err(crash(format!("cannot run git: {message}"))),
            end => Ok((
                end,
                String::from_utf8_lossy(&report.stdout).trim().to_owned(),
                Vec::from(stderr.0).join("\n"),
            )),
        }
    }

    pub async fn run(&self, args: &[&str]) -> Result<String, DeliveryFailure> {
        self.run_with(args, None).await
    }

    /// As [`Git::run`] on the private index `index` instead of the user's.
    pub async fn run_with(
        &self,
        args: &[&str],
        index: Option<&Path>,
    ) -> Result<String, DeliveryFailure> {
        match self.call_with(args, index).await? {
            (end, stdout, _) if end.success() => Ok(stdout),
            (end, _, stderr) => Err(crash(format!(
                "git {} failed ({}): {}",
                args.first().copied().unwrap_or_default(),
                end.describe(),
                stderr.trim()
            ))),
        }
    }

    pub async fn succeeds(&self, args: &[&str]) -> Result<bool, DeliveryFailure> {
        Ok(self.call(args).await?.0.success())
    }
}

/// Removes `user:password@` from a remote URL so a receipt never carries credentials.
pub fn without_userinfo(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://")
        && let Some((_, host)) = rest.split_once('@')
    {
        return format!("{scheme}://{host}");
    }
    url.to_owned()
}

/// What a push left behind.
pub(super) struct Pushed {
    pub head: String,
    pub branch: String,
    /// The branch the run started on: what a pull request targets.
    pub target_branch: String,
    /// The remote's URL as configured (before `insteadOf` rewriting), credentials removed.
    pub configured_url: String,
    /// The URL git actually pushed to, credentials removed.
    pub push_url: String,
    /// The remote pushed to (its name).
    pub remote: String,
}

/// Commits the workspace as it is (if it differs from what was delivered) and checks that the
/// candidate is new and descends from the run's base; the candidate's commit.
pub(super) async fn prepare_candidate(
    git: &Git<'_>,
    request: &ExecutionRequest,
    source: &SourceRevision,
    branch: &str,
    log: &(dyn Fn(String) + Sync),
) -> Result<String, DeliveryFailure> {
    let head = commit_candidate(git, request, branch, source, log).await?;
    if head == source.revision {
        return Err(DeliveryFailure {
            code: WorkerErrorCode::Malformed,
            message: "workspace has no deliverable mutation".into(),
        });
    }
    if !git
        .succeeds(&["merge-base", "--is-ancestor", &source.revision, &head])
        .await?
    {
        return Err(crash(format!(
            "the candidate {head} does not descend from the run's base revision {}",
            source.revision
        )));
    }
    Ok(head)
}

/// Pushes the candidate `head` as `branch` to `remote`.
pub(super) async fn push_run_branch(
    git: &Git<'_>,
    source: &SourceRevision,
    head: &str,
    (branch, remote): (&str, &str),
    log: &(dyn Fn(String) + Sync),
) -> Result<Pushed, DeliveryFailure> {
    log(format!("delivery: pushing run branch {branch} to {remote}"));
    push_head(git, remote, head, branch).await?;
    let push_url = git
        .run(&["remote", "get-url", remote])
        .await
        .unwrap_or_else(|_| remote.to_owned());
    let configured_url = git
        .run(&["config", "--get", &format!("remote.{remote}.url")])
        .await
        .unwrap_or_else(|_| push_url.clone());
    log(format!("delivery: pushed {head} as {branch}"));
    Ok(Pushed {
        head: head.to_owned(),
        branch: branch.to_owned(),
        target_branch: source.branch.clone(),
        configured_url: without_userinfo(&configured_url),
        push_url: without_userinfo(&push_url),
        remote: remote.to_owned(),
    })
}

/// Where a conflicted merge's target is remembered until a later delivery commits the
/// resolution with it as a second parent.
fn pending_merge_ref(branch: &str) -> String {
    let short = branch.strip_prefix("trellis/").unwrap_or(branch);
    format!("refs/trellis/pending-merges/{short}")
}

/// The subject of the commit a pending merge's reference names (its parent is the target).
const PENDING_MERGE_SUBJECT: &str = "trellis: pending merge of the target";

/// Records the target of a conflicted merge for the delivery that commits its resolution, as a
/// commit whose parent is the target and whose message names the run and execution that
/// merged (a resume from a checkpoint before that execution drops it).
pub(super) async fn record_pending_merge(
    git: &Git<'_>,
    branch: &str,
    target: &str,
    (run_id, execution): (&str, u64),
) -> Result<(), DeliveryFailure> {
    let message = format!("{PENDING_MERGE_SUBJECT}\n\nRun: {run_id}\nExecution: {execution}\n");
    let tree = format!("{target}^{{tree}}");
    let marker = git
        .run(&["commit-tree", &tree, "-p", target, "-m", &message])
        .await?;
    git.run(&["update-ref", &pending_merge_ref(branch), &marker])
        .await
        .map(|_| ())
}

/// The target a pending merge's reference names: the parent of its marker commit (or, as
/// older runs recorded it, the commit itself).
pub(super) async fn pending_merge_target(
    git: &Git<'_>,
    reference: &str,
) -> Result<Option<String>, DeliveryFailure> {
    let commit = format!("{reference}^{{commit}}");
    let Ok(marker) = git
        .run(&["rev-parse", "--verify", "--quiet", &commit])
        .await
    else {
        return Ok(None);
    };
    if marker.is_empty() {
        return Ok(None);
    }
    let subject = git.run(&["log", "-1", "--format=%s", &marker]).await?;
    if subject.trim() != PENDING_MERGE_SUBJECT {
        return Ok(Some(marker));
    }
    git.run(&["rev-parse", &format!("{marker}^1")])
        .await
        .map(Some)
}

/// Deletes the pending merges that run `run_id` recorded at or after execution `from` (a resume
/// from a checkpoint taken before them restores a work tree without their conflicts, so their
/// target must not become a parent of what is delivered next). Returns how many it deleted.
pub fn drop_pending_merges_from(
    repo: &trellis_workspace::Repository,
    run_id: &str,
    from: u64,
) -> Result<usize, trellis_workspace::WorkspaceError> {
    let marked = trellis_workspace::references_with_messages(repo, "refs/trellis/pending-merges/")?;
    let field = |message: &str, key: &str| {
        message
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .map(|value| value.trim().to_owned())
    };
    let stale: Vec<(String, trellis_workspace::ObjectId)> = marked
        .into_iter()
        .filter(|(_, _, message)| {
            let made_here = field(message, "Run: ").as_deref() == Some(run_id);
            let execution = field(message, "Execution: ").and_then(|e| e.parse::<u64>().ok());
            made_here && execution.is_some_and(|execution| execution >= from)
        })
        .map(|(name, object, _)| (name, object))
        .collect();
    let dropped = stale.len();
    trellis_workspace::delete_references(repo, &stale)?;
    Ok(dropped)
}

/// Pushes commit `head` as the run branch `branch` (a fast-forward of what was pushed before).
pub(super) async fn push_head(
    git: &Git<'_>,
    remote: &str,
    head: &str,
    branch: &str,
) -> Result<(), DeliveryFailure> {
    git.run(&[
        "push",
        "--quiet",
        remote,
        &format!("{head}:refs/heads/{branch}"),
    ])
    .await
    .map(|_| ())
}

/// Where the last commit delivered on `branch` is recorded, so a later round of the same
/// lineage builds on it (a fast-forward of the pushed branch) without any user ref moving.
pub(super) fn delivered_ref(branch: &str) -> String {
    let short = branch.strip_prefix("trellis/").unwrap_or(branch);
    format!("refs/trellis/deliveries/{short}")
}

/// The commit to deliver: the work tree as it is now (tracked and untracked files, ignored ones
/// left out) on top of the last delivered commit, or of HEAD on the first delivery. Staging
/// happens in a private copy of the index (`GIT_INDEX_FILE`), the commit is made with
/// `commit-tree`, and only `refs/trellis/deliveries/<run>` records it.
async fn commit_candidate(
    git: &Git<'_>,
    request: &ExecutionRequest,
    branch: &str,
    source: &SourceRevision,
    log: &(dyn Fn(String) + Sync),
) -> Result<String, DeliveryFailure> {
    let head = git.run(&["rev-parse", "HEAD"]).await?;
    let recorded = delivered_ref(branch);
    let delivered = git
        .run(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{recorded}^{{commit}}"),
        ])
        .await
        .ok()
        .filter(|sha| !sha.is_empty());
    log("delivery: staging workspace changes".into());
    let tree = work_tree_as_tree(git, branch).await?;
    let base = delivered.clone().unwrap_or_else(|| head.clone());
    // Commits an agent made itself after the last delivery are kept as a second parent.
    let head_included = match &delivered {
        None => true,
        Some(previous) => {
            head == source.revision
                || git
                    .succeeds(&["merge-base", "--is-ancestor", &head, previous])
                    .await?
        }
    };
    // A target merge that conflicted earlier: the resolution in the work tree becomes a merge
    // of it, so the target's tip is an ancestor of what is pushed.
    let pending_ref = pending_merge_ref(branch);
    let pending = match pending_merge_target(git, &pending_ref).await? {
        Some(sha) => {
            git.run(&["update-ref", "-d", &pending_ref]).await?;
            let merged = git
                .succeeds(&["merge-base", "--is-ancestor", &sha, &base])
                .await?;
            (!merged).then_some(sha)
        }
        _ => None,
    };
    let base_tree = git.run(&["rev-parse", &format!("{base}^{{tree}}")]).await?;
    if tree == base_tree && head_included && pending.is_none() {
        return Ok(base);
    }
    let text = |field: &str| request.input.get(field).and_then(Value::as_str);
    let message = commit_message(
        text("title").unwrap_or("Trellis change"),
        text("description").unwrap_or(""),
        &request.run_id,
    );
    log("delivery: committing workspace changes".into());
    let mut args = vec!["commit-tree", tree.as_str(), "-p", base.as_str()];
    if !head_included {
        args.extend(["-p", head.as_str()]);
    }
    if let Some(target) = &pending {
        args.extend(["-p", target.as_str()]);
    }
    args.extend(["-m", message.as_str()]);
    let commit = git.run(&args).await?;
    git.run(&["update-ref", &recorded, &commit]).await?;
    Ok(commit)
}

/// Writes the work tree as a tree object through a private copy of the user's index (its stat
/// data keeps `add` fast), which is removed afterwards.
async fn work_tree_as_tree(git: &Git<'_>, branch: &str) -> Result<String, DeliveryFailure> {
    let short = branch.strip_prefix("trellis/").unwrap_or(branch);
    let user_index = git
        .run(&["rev-parse", "--path-format=absolute", "--git-path", "index"])
        .await?;
    let private = git
        .run(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-path",
            &format!("trellis-delivery-{short}.index"),
        ])
        .await?;
    let private = Path::new(&private);
    // A delivery killed mid-`add` leaves its lock; the run's lease says no one else uses it.
    let _ = std::fs::remove_file(format!("{}.lock", private.display()));
    let copied = match std::fs::copy(&user_index, private) {
        Ok(_) => true,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
        Err(error) => return Err(crash(format!("cannot copy the git index: {error}"))),
    };
    let result = async {
        if !copied {
            git.run_with(&["read-tree", "HEAD"], Some(private)).await?;
        }
        git.run_with(&["add", "--all"], Some(private)).await?;
        git.run_with(&["write-tree"], Some(private)).await
    }
    .await;
    let _ = std::fs::remove_file(private);
    result
}

fn commit_message(title: &str, body: &str, run_id: &str) -> String {
    let subject: String = title
        .lines()
        .next()
        .unwrap_or("Trellis change")
        .chars()
        .take(72)
        .collect();
    let mut message = subject;
    if !body.trim().is_empty() {
        message.push_str("\n\n");
        message.push_str(body.trim());
    }
    message.push_str(&format!("\n\nTrellis-Run: {run_id}"));
    message
}

/// Git sees `PATH`, `HOME`, a fixed identity, no prompts, and a credential helper that reads
/// `GH_TOKEN` from its environment when the binding declares it (the value never hits argv).
pub(super) fn delivery_env(request: &ExecutionRequest) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = request
        .base_env
        .iter()
        .filter(|(k, _)| k == "PATH" || k == "HOME")
        .cloned()
        .collect();
    for (k, v) in [
        ("GIT_AUTHOR_NAME", AUTHOR_NAME),
        ("GIT_AUTHOR_EMAIL", AUTHOR_EMAIL),
        ("GIT_COMMITTER_NAME", AUTHOR_NAME),
        ("GIT_COMMITTER_EMAIL", AUTHOR_EMAIL),
        ("GIT_TERMINAL_PROMPT", "0"),
    ] {
        env.push((k.into(), v.into()));
    }
    if let Some(token) = request.environment.get("GH_TOKEN") {
        env.push(("GH_TOKEN".into(), token.to_owned()));
        env.push(("GIT_CONFIG_COUNT".into(), "1".into()));
        env.push(("GIT_CONFIG_KEY_0".into(), "credential.helper".into()));
        env.push((
            "GIT_CONFIG_VALUE_0".into(),
            "!f() { echo username=x-access-token; echo \"password=$GH_TOKEN\"; }; f".into(),
        ));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_branches_are_short_and_stable() {
        assert_eq!(
            run_branch("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
            "trellis/0190a1b2c3d4"
        );
    }

    #[test]
    fn receipts_never_carry_credentials() {
        assert_eq!(
            without_userinfo("https://u:tok@github.com/a/b.git"),
            "https://github.com/a/b.git"
        );
        assert_eq!(without_userinfo("/srv/git/repo.git"), "/srv/git/repo.git");
    }

    #[test]
    fn a_resume_drops_only_the_pending_merges_its_run_made_after_the_checkpoint() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        let git = |args: &[&str]| {
            let output = std::process::Command::new("git")
                .args(args)
                .current_dir(root)
                .env("GIT_AUTHOR_NAME", "T")
                .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
                .env("GIT_COMMITTER_NAME", "T")
                .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
                .output()
                .expect("git runs");
            assert!(output.status.success(), "git {args:?}");
            String::from_utf8_lossy(&output.stdout).trim().to_owned()
        };
        git(&["init", "--quiet"]);
        git(&["commit", "--quiet", "--allow-empty", "-m", "target"]);
        let target = git(&["rev-parse", "HEAD"]);
        let mark = |name: &str, run: &str, execution: u64| {
            let message =
                format!("{PENDING_MERGE_SUBJECT}\n\nRun: {run}\nExecution: {execution}\n");
            let tree = format!("{target}^{{tree}}");
            let marker = git(&["commit-tree", &tree, "-p", &target, "-m", &message]);
            git(&[
                "update-ref",
                &format!("refs/trellis/pending-merges/{name}"),
                &marker,
            ]);
        };
        mark("late", "run-a", 7);
        mark("at-checkpoint", "run-a", 5);
        mark("early", "run-a", 4);
        mark("other-run", "run-b", 9);
        // A pending merge as older runs recorded it: the target itself.
        git(&["update-ref", "refs/trellis/pending-merges/legacy", &target]);

        let repo =
            trellis_workspace::Repository::open(root, &trellis_workspace::Git::from_environment())
                .expect("repository");
        assert_eq!(
            drop_pending_merges_from(&repo, "run-a", 5).expect("dropped"),
            2
        );
        let left = git(&[
            "for-each-ref",
            "--format=%(refname:lstrip=3)",
            "refs/trellis/pending-merges/",
        ]);
        assert_eq!(left, "early\nlegacy\nother-run");
    }
}
