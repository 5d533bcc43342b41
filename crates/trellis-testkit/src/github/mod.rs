//! A fake GitHub REST API on loopback: the real paths and JSON shapes of the endpoints Trellis
//! uses (repository, branches, pull requests, issues, issue comments, reviews, review comments,
//! check runs, combined status, merge), token authentication with GitHub's 401s, GitHub's
//! 404/405/409/422 answers, and a record of every call.
//!
//! Tests script its state with [`FakeGitHub::apply`] (or the helpers around it) while it runs;
//! the `trellis-fake-github` binary serves the same fake to subprocess tests, which script it
//! through `POST /__fake/actions` (an [`Action`] or a list of them) and read `GET /__fake/calls`.
//! The API is served at the root (like `api.github.com`) and under `/api/v3` (like GitHub
//! Enterprise Server).

mod action;
mod answer;
mod extras;
mod faults;
mod graphql;
mod policy;
mod pulls;
mod render;
mod routes;
mod scripting;
mod world;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use routes::{Auth, Call};
pub use world::Action;

use render::Links;
use routes::{Shared, lock};
use world::{Pull, World};

/// How long `shutdown` waits for open connections before dropping them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// What a fake GitHub is configured with.
#[derive(Debug, Clone)]
pub struct GitHubOptions {
    /// The only credential the fake accepts (as `Bearer` or `token`).
    pub token: String,
    /// The web host `html_url`s point at (default `https://github.com`).
    pub web_url: String,
}

impl GitHubOptions {
    pub fn new(token: &str) -> GitHubOptions {
        GitHubOptions {
            token: token.to_owned(),
            web_url: "https://github.com".into(),
        }
    }
}

/// A running fake GitHub on `127.0.0.1`. Dropping it stops the server.
pub struct FakeGitHub {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl FakeGitHub {
    /// Starts a fake accepting `token`, on an ephemeral port, inside the current Tokio runtime.
    pub async fn start(token: &str) -> std::io::Result<FakeGitHub> {
        FakeGitHub::start_on(GitHubOptions::new(token), 0).await
    }

    /// Starts a fake with `options` on `port` (0 for an ephemeral one).
    pub async fn start_on(options: GitHubOptions, port: u16) -> std::io::Result<FakeGitHub> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            world: Mutex::new(World::default()),
            calls: Mutex::new(Vec::new()),
            token: options.token,
            links: Links {
                web: options.web_url.trim_end_matches('/').to_owned(),
                api: format!("http://{addr}"),
            },
        });
        let app = axum::Router::new()
            .fallback(routes::handle)
            .with_state(shared.clone());
        let (stop, mut stopping) = watch::channel(false);
        let task = tokio::spawn(async move {
            let stopped = async move {
                let _ = stopping.wait_for(|stop| *stop).await;
            };
            if let Err(error) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                eprintln!("trellis-testkit: fake GitHub stopped with error: {error}");
            }
        });
        Ok(FakeGitHub {
            addr,
            shared,
            stop,
            task: Some(task),
            runtime: None,
        })
    }

    /// Starts a fake on its own background runtime, for synchronous tests.
    pub fn start_blocking(token: &str) -> std::io::Result<FakeGitHub> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let mut server = runtime.block_on(FakeGitHub::start(token))?;
        server.runtime = Some(runtime);
        Ok(server)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: the API base URL (like `https://api.github.com`).
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/api/v3`: the same API as GitHub Enterprise Server lays it out.
    pub fn enterprise_api_url(&self) -> String {
        format!("{}/api/v3", self.api_url())
    }

    /// Applies one scripted change; the answer names what was created (`{"number": N}`,
    /// `{"id": N}`).
    pub fn apply(&self, action: Action) -> Result<Value, String> {
        lock(&self.shared.world).apply(action)
    }

    /// Applies a list of actions given as JSON (the seed-file and control-endpoint format).
    pub fn apply_json(&self, actions: &Value) -> Result<Vec<Value>, String> {
        let actions: Vec<Action> = if actions.is_array() {
            serde_json::from_value(actions.clone())
        } else {
            serde_json::from_value(actions.clone()).map(|one| vec![one])
        }
        .map_err(|e| format!("bad action: {e}"))?;
        let mut world = lock(&self.shared.world);
        actions.into_iter().map(|a| world.apply(a)).collect()
    }

    /// Creates repository `owner/name` with its default branch at `sha`.
    pub fn add_repository(&self, repository: &str, default_branch: &str, sha: &str) {
        self.must(Action::AddRepository {
            repository: repository.into(),
            default_branch: default_branch.into(),
            private: false,
            git_dir: None,
        });
        self.set_branch(repository, default_branch, sha);
    }

    /// Points `branch` at `sha`.
    pub fn set_branch(&self, repository: &str, branch: &str, sha: &str) {
        self.must(Action::SetBranch {
            repository: repository.into(),
            branch: branch.into(),
            sha: sha.into(),
        });
    }

    /// Opens an issue; returns its number.
    pub fn add_issue(&self, repository: &str, title: &str, body: &str, labels: &[&str]) -> u64 {
        self.number(Action::AddIssue {
            repository: repository.into(),
            title: title.into(),
            body: body.into(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            author: "octocat".into(),
        })
    }

    /// Opens a pull request from `head` into `base` (both must exist); returns its number.
    pub fn add_pull(
        &self,
        repository: &str,
        title: &str,
        body: &str,
        head: &str,
        base: &str,
    ) -> u64 {
        self.number(Action::AddPull {
            repository: repository.into(),
            title: title.into(),
            body: body.into(),
            head: head.into(),
            base: base.into(),
            head_repository: None,
            head_sha: None,
            labels: Vec::new(),
            draft: false,
            author: "octocat".into(),
        })
    }

    /// A reviewer comments on line `line` of `path`; returns the comment id.
    pub fn add_review_comment(
        &self,
        repository: &str,
        number: u64,
        path: &str,
        line: u64,
        body: &str,
    ) -> u64 {
        self.id(Action::AddReviewComment {
            repository: repository.into(),
            number,
            path: path.into(),
            line,
            body: body.into(),
            author: "reviewer".into(),
        })
    }

    /// `author` submits a review in `state` (`APPROVED`, `CHANGES_REQUESTED`, …); returns its id.
    pub fn add_review(
        &self,
        repository: &str,
        number: u64,
        author: &str,
        state: &str,
        body: &str,
    ) -> u64 {
        self.id(Action::AddReview {
            repository: repository.into(),
            number,
            state: state.into(),
            body: body.into(),
            author: author.into(),
        })
    }

    /// Sets check run `name` on the head of pull request `number` (`conclusion` `None` while it
    /// is still running).
    pub fn set_check_run(
        &self,
        repository: &str,
        number: u64,
        name: &str,
        conclusion: Option<&str>,
    ) {
        self.must(Action::SetCheckRun {
            repository: repository.into(),
            sha: None,
            pull: Some(number),
            name: name.into(),
            status: if conclusion.is_some() {
                "completed"
            } else {
                "in_progress"
            }
            .into(),
            conclusion: conclusion.map(str::to_owned),
            summary: String::new(),
        });
    }

    /// Makes every commit of `repository` report the checks `names` as queued until set.
    pub fn require_checks(&self, repository: &str, names: &[&str]) {
        self.must(Action::RequireChecks {
            repository: repository.into(),
            names: names.iter().map(|n| (*n).to_owned()).collect(),
        });
    }

    /// Makes a pull request conflict (`Some(false)`), clean (`Some(true)`) or still computed.
    pub fn set_mergeable(&self, repository: &str, number: u64, mergeable: Option<bool>) {
        self.must(Action::SetMergeable {
            repository: repository.into(),
            number,
            mergeable,
        });
    }

    /// Answers the next `count` API calls with `status` (a rate-limit 403 with
    /// `rate_limited`).
    pub fn fail_next(&self, status: u16, count: u32, rate_limited: bool) {
        self.must(Action::FailNext {
            status,
            count,
            rate_limited,
            retry_after: None,
            method: None,
            path_suffix: None,
            applied: false,
        });
    }

    /// Serves the next `count` calls with `method` whose path ends with `suffix`, then answers
    /// them `status`: the change took effect, the caller hears a failure (GitHub's 502 after a
    /// write it applied).
    pub fn apply_then_fail(&self, method: &str, suffix: &str, status: u16, count: u32) {
        self.must(Action::FailNext {
            status,
            count,
            rate_limited: false,
            retry_after: None,
            method: Some(method.into()),
            path_suffix: Some(suffix.into()),
            applied: true,
        });
    }

    /// Answers the next `count` calls with `method` whose path ends with `suffix` with
    /// `status`, without serving them.
    pub fn refuse_next(&self, method: &str, suffix: &str, status: u16, count: u32) {
        self.must(Action::FailNext {
            status,
            count,
            rate_limited: false,
            retry_after: None,
            method: Some(method.into()),
            path_suffix: Some(suffix.into()),
            applied: false,
        });
    }

    /// Drops every injected fault not yet spent.
    pub fn clear_faults(&self) {
        self.must(Action::ClearFaults {});
    }

    /// The bodies of an issue's or pull request's conversation comments, oldest first.
    pub fn comment_bodies(&self, repository: &str, number: u64) -> Vec<String> {
        let world = lock(&self.shared.world);
        world
            .repo(repository)
            .map(|r| {
                r.comments
                    .iter()
                    .filter(|c| c.number == number)
                    .map(|c| c.body.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The current head commit of pull request `number` (read from its branch).
    pub fn pull_head(&self, repository: &str, number: u64) -> Option<String> {
        lock(&self.shared.world).head_sha(repository, number).ok()
    }

    /// The head branch of pull request `number`.
    pub fn pull_branch(&self, repository: &str, number: u64) -> Option<String> {
        lock(&self.shared.world)
            .pull_mut(repository, number)
            .ok()
            .map(|pull| pull.head_ref.clone())
    }

    /// Numbers of the pull requests in a repository (open or not), in creation order.
    pub fn pull_numbers(&self, repository: &str) -> Vec<u64> {
        let world = lock(&self.shared.world);
        world
            .repo(repository)
            .map(|r| {
                r.issues
                    .values()
                    .filter(|i| i.pull.is_some())
                    .map(|i| i.number)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether pull request `number` was merged.
    pub fn is_merged(&self, repository: &str, number: u64) -> bool {
        let world = lock(&self.shared.world);
        world
            .repo(repository)
            .and_then(|r| r.issues.get(&number))
            .and_then(|i| i.pull.as_ref())
            .is_some_and(Pull::merged)
    }

    // Scripting helpers are for tests: a script error is a bug in the test itself.
    fn must(&self, action: Action) -> Value {
        self.apply(action)
            .unwrap_or_else(|error| panic!("fake GitHub script error: {error}"))
    }

    fn number(&self, action: Action) -> u64 {
        self.must(action)["number"].as_u64().unwrap_or_default()
    }

    fn id(&self, action: Action) -> u64 {
        self.must(action)["id"].as_u64().unwrap_or_default()
    }

    /// Every API call so far, in arrival order (control calls are not recorded).
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.shared.calls).clone()
    }

    /// Calls with this method whose path ends with `suffix`.
    pub fn calls_to(&self, method: &str, suffix: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method && c.path.ends_with(suffix))
            .collect()
    }

    /// Stops the server and waits briefly for open connections.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(SHUTDOWN_GRACE, task).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
