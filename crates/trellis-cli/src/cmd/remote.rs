//! The commands a `--target NAME` naming a team server sends over HTTP instead of opening a
//! ledger: run (the documents are read here and sent), status, list, watch, logs, force-stop,
//! resume, checkpoints, discard-workspace and prune. Output is machine output (JSON / NDJSON,
//! the same shapes as local `--json`); a problem answer becomes an error carrying its code.
//! A run (and its resumption) carries the caller's values of exactly the connection variables
//! the server reports the run requires, under a per-run authorization kept here
//! ([`crate::cmd::authorization`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};

use crate::cmd::authorization::{self, Authorization};
use crate::cmd::control::{CheckpointsArgs, ResumeArgs};
use crate::cmd::observe::{ListArgs, StatusArgs, WatchArgs};
use crate::cmd::prune::PruneArgs;
use crate::cmd::run_args::{RunArgs, delivery};
use crate::cmd::target::Target;

/// A team server and its token.
pub struct Remote {
    /// The target's name (`trellis target add NAME`).
    name: String,
    base: String,
    token: String,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl Remote {
    pub fn new(name: &str, target: &Target) -> anyhow::Result<Self> {
        let base = target
            .url
            .clone()
            .ok_or_else(|| anyhow!("target {name} is not a server"))?;
        let variable = target
            .token_env
            .as_deref()
            .ok_or_else(|| anyhow!("target {name} names no token variable"))?;
        let token = std::env::var(variable)
            .map_err(|_| anyhow!("{variable} (the token of target {name}) is not set"))?;
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .context("cannot build the HTTP client")?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        Ok(Self {
            name: name.to_owned(),
            base,
            token: token.trim().to_owned(),
            client,
            runtime,
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}/api/v1{path}", self.base))
            .bearer_auth(&self.token)
    }

    /// Sends a bodiless request to `path` outside the run API (`/signin/link`): its JSON
    /// answer, or the problem it got as an error.
    pub(crate) fn call_outside_api(
        &self,
        method: reqwest::Method,
        path: &str,
    ) -> anyhow::Result<Value> {
        self.runtime.block_on(async {
            let response = self
                .client
                .request(method, format!("{}{path}", self.base))
                .bearer_auth(&self.token)
                .timeout(std::time::Duration::from_secs(30))
                .send()
                .await
                .with_context(|| format!("cannot reach {}", self.base))?;
            answer(response).await
        })
    }

    /// Sends a request and returns its JSON answer, or the problem it got as an error.
    pub(crate) fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        match self.exchange(method, path, body)? {
            Ok(value) => Ok(value),
            Err(problem) => Err(problem_error(&problem)),
        }
    }

    /// Sends a request: its JSON answer, or the problem document it got (to read its
    /// `details`); only a failure to talk to the server is an error.
    pub(crate) fn exchange(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Result<Value, Value>> {
        self.runtime.block_on(async {
            let mut request = self
                .request(method, path)
                .timeout(std::time::Duration::from_secs(120));
            if let Some(body) = body {
                request = request.json(&body);
            }
            let response = request
                .send()
                .await
                .with_context(|| format!("cannot reach {}", self.base))?;
            read_answer(response).await
        })
    }

    /// Prints every data event's data of an SSE route (the run API's unnamed `message`
    /// events) as one line, until the stream ends.
    fn stream(&self, path: &str) -> anyhow::Result<()> {
        self.stream_data(path, &mut |data| {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{data}")?;
            out.flush()?;
            Ok(())
        })
    }

    /// Reads the server-sent events at `path` until `end`, handing each unnamed event's data
    /// to `on_data`; a `problem` event fails.
    pub(crate) fn stream_data(
        &self,
        path: &str,
        on_data: &mut dyn FnMut(&str) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        self.runtime.block_on(async {
            let mut response = self
                .request(reqwest::Method::GET, path)
                .send()
                .await
                .with_context(|| format!("cannot reach {}", self.base))?;
            if !response.status().is_success() {
                answer(response).await?;
                bail!("the server refused the stream");
            }
            let mut pending = String::new();
            let mut event = String::new();
            while let Some(chunk) = response.chunk().await.context("the stream broke")? {
                pending.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = pending.find('\n') {
                    let line: String = pending.drain(..=end).collect();
                    let line = line.trim_end_matches(['\n', '\r']);
                    if line.is_empty() {
                        // A blank line ends an event: the next one is unnamed until it says.
                        event.clear();
                    } else if let Some(name) = line.strip_prefix("event:") {
                        event = name.trim().to_owned();
                    } else if let Some(data) = line.strip_prefix("data:") {
                        match event.as_str() {
                            "" | "message" => on_data(data.trim())?,
                            "problem" => bail!("the stream failed: {}", data.trim()),
                            "end" => return Ok(()),
                            _ => {}
                        }
                    }
                }
            }
            Ok(())
        })
    }
}

/// A problem the server answered: its code (for callers that branch on it) and message.
#[derive(Debug)]
pub struct RemoteProblem {
    pub code: String,
    pub message: String,
    pub status: u16,
}

impl std::fmt::Display for RemoteProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, HTTP {})", self.message, self.code, self.status)
    }
}

impl std::error::Error for RemoteProblem {}

async fn answer(response: reqwest::Response) -> anyhow::Result<Value> {
    read_answer(response)
        .await?
        .map_err(|problem| problem_error(&problem))
}

/// The answer's JSON: `Ok` on success, `Err` with the problem document (its HTTP status
/// added as `status`) otherwise.
async fn read_answer(response: reqwest::Response) -> anyhow::Result<Result<Value, Value>> {
    let status = response.status();
    let text = response.text().await.context("the answer broke off")?;
    let mut value: Value = serde_json::from_str(&text)
        .with_context(|| format!("the server answered {status} with something not JSON"))?;
    if status.is_success() {
        return Ok(Ok(value));
    }
    value["status"] = json!(status.as_u16());
    Ok(Err(value))
}

/// A problem answer (its HTTP status added as `status`) as an error carrying its code: a
/// [`RemoteProblem`], for callers that branch on the code.
pub(crate) fn problem_error(problem: &Value) -> anyhow::Error {
    RemoteProblem {
        code: problem["code"].as_str().unwrap_or("unknown").to_owned(),
        message: problem["message"]
            .as_str()
            .unwrap_or("no message")
            .to_owned(),
        status: problem["status"]
            .as_u64()
            .and_then(|status| u16::try_from(status).ok())
            .unwrap_or(0),
    }
    .into()
}

/// The variable names of a requirements answer (`{"connections": [...]}`).
fn required_names(answer: &Value) -> anyhow::Result<Vec<String>> {
    let names = answer["connections"]
        .as_array()
        .ok_or_else(|| anyhow!("the server's requirements answer names no connections"))?;
    names
        .iter()
        .map(|name| {
            name.as_str()
                .map(str::to_owned)
                .ok_or_else(|| anyhow!("the server's requirements answer is malformed"))
        })
        .collect()
}

impl Remote {
    /// The values of `names` in this process's environment (a variable not set here is left
    /// to the server, which refuses the run if it cannot supply it either). Refuses to send
    /// any over plain http beyond loopback unless `insecure`, as `serve` refuses tokens.
    fn connection_values(
        &self,
        names: &[String],
        insecure: bool,
    ) -> anyhow::Result<BTreeMap<String, String>> {
        let values: BTreeMap<String, String> = names
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|value| (name.clone(), value)))
            .collect();
        if !values.is_empty() && !insecure && !self.protects_secrets() {
            bail!(
                "refusing to send {} to {} over plain http (not a loopback address): use an \
                 https target, or add --insecure if the network is trusted",
                values.keys().cloned().collect::<Vec<_>>().join(", "),
                self.base
            );
        }
        Ok(values)
    }

    fn protects_secrets(&self) -> bool {
        protected(&self.base)
    }
}

/// Whether what is sent to the server at `base` is protected on the way: https, or a loopback
/// host.
pub(crate) fn protected(base: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base) else {
        return false;
    };
    url.scheme() == "https"
        || match url.host_str() {
            Some("localhost") => true,
            Some(host) => host
                .trim_matches(['[', ']'])
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback()),
            None => false,
        }
}

fn read_json(path: &Path, what: &str) -> anyhow::Result<Value> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read {what} {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{what} {} is not JSON", path.display()))
}

pub(crate) fn path_segment(run: &str) -> anyhow::Result<&str> {
    // Run ids are checked by the server; this only keeps a path out of the URL.
    if run.is_empty() || run.contains(['/', '?', '#', '%']) {
        bail!("{run:?} is not a run id");
    }
    Ok(run)
}

/// Follows a run and exits 0 if it succeeded, 1 otherwise. A run that succeeded cannot be
/// resumed, so its authorization is revoked.
fn follow(remote: &Remote, run: &str) -> anyhow::Result<u8> {
    remote.stream(&format!("/runs/{run}/watch"))?;
    let status = remote.call(reqwest::Method::GET, &format!("/runs/{run}"), None)?;
    if status["status"]["terminalResult"]["status"] == "succeeded" {
        authorization::revoke(run)?;
        Ok(0)
    } else {
        Ok(1)
    }
}

pub fn run(remote: &Remote, args: &RunArgs) -> anyhow::Result<u8> {
    if args.cwd.is_some() || args.validate_only {
        bail!("--cwd and --validate-only are local: a remote run works in the server's workspace");
    }
    if args.task_from.is_some() {
        bail!("--task-from is resolved locally: run it without --target");
    }
    let mut body = json!({});
    if !args.source.no_source {
        let checkout = std::env::current_dir().context("cannot read the current directory")?;
        let source = trellis_runtime::resolve_source(&trellis_runtime::SourceRequest {
            checkout,
            repository: args.source.source_remote.clone(),
            branch: args.source.source_branch.clone(),
            allow_untracked: args.source.allow_untracked,
        })?;
        body["source"] = serde_json::to_value(&source)?;
    }
    match (&args.template, args.path.as_ref().or(args.graph.as_ref())) {
        _ if args.profile.is_some() => body["profile"] = json!(args.profile),
        (Some(name), _) => body["template"] = template_choice(name, args)?,
        (None, Some(path)) => body["graph"] = read_json(path, "graph")?,
        (None, None) => {
            bail!("say what to run: GRAPH.json, --graph FILE, --template NAME or --profile NAME")
        }
    }
    if let Some(task) = &args.task {
        body["task"] = json!(task);
    }
    if let Some(input) = &args.input {
        body["input"] = read_json(input, "input")?;
    }
    match (&args.runtime_config, &args.uniform_runtime_config) {
        (Some(file), _) => body["plan"] = json!({"exact": read_json(file, "plan")?}),
        (None, Some(file)) => body["plan"] = json!({"uniform": read_json(file, "plan")?}),
        (None, None) => {}
    }
    if let Some(key) = &args.submission_key {
        body["submissionKey"] = json!(key);
    }
    if let Some(title) = args.title.clone().or_else(|| args.profile_title()) {
        body["title"] = json!(title);
    }
    if args.no_preflight {
        body["noPreflight"] = json!(true);
    }
    if let Some(path) = &args.environment {
        // Checked here first, so a mistake is named before anything is sent.
        body["environment"] = serde_json::to_value(crate::cmd::run_args::read_environment(path)?)?;
    }
    if args.no_environment {
        body["noEnvironment"] = json!(true);
    }
    // The server admits the run first and names the variables it requires: exactly those
    // are read here and sent.
    let mut asked = body.clone();
    if let Some(object) = asked.as_object_mut() {
        object.remove("source");
    }
    let requirements = remote.call(reqwest::Method::POST, "/runs/requirements", Some(asked))?;
    let required = required_names(&requirements)?;
    let values = remote.connection_values(&required, args.insecure)?;
    if !values.is_empty() {
        body["connections"] = serde_json::to_value(&values)?;
    }
    let receipt = remote.call(reqwest::Method::POST, "/runs", Some(body))?;
    outln!("{receipt}");
    std::io::stdout().flush()?;
    let run = receipt["runId"]
        .as_str()
        .ok_or_else(|| anyhow!("the server's receipt has no runId"))?
        .to_owned();
    authorization::save(&Authorization::new(
        &run,
        &remote.name,
        &remote.base,
        required,
    ))?;
    if args.detach {
        return Ok(0);
    }
    follow(remote, &run)
}

/// The submit body's `template`: its name and the delivery the flags ask for.
fn template_choice(name: &str, args: &RunArgs) -> anyhow::Result<Value> {
    let delivery = delivery(args)?;
    let mut choice = json!({"name": name});
    if let Some(mode) = delivery.mode {
        choice["delivery"] = json!(mode.as_str());
    }
    if delivery.ignore_pr_feedback {
        choice["ignore_pr_feedback"] = json!(true);
    }
    Ok(choice)
}

pub fn status(remote: &Remote, args: &StatusArgs) -> anyhow::Result<u8> {
    let run = path_segment(&args.run)?;
    outln!(
        "{}",
        remote.call(reqwest::Method::GET, &format!("/runs/{run}"), None)?
    );
    Ok(0)
}

pub fn list(remote: &Remote, args: &ListArgs) -> anyhow::Result<u8> {
    let path = format!("/runs?limit={}", args.limit.clamp(1, 1000));
    outln!("{}", remote.call(reqwest::Method::GET, &path, None)?);
    Ok(0)
}

fn after_query(after: Option<&str>) -> anyhow::Result<String> {
    Ok(match after {
        None => String::new(),
        Some(cursor) => {
            trellis_runtime::Cursor::parse(cursor).map_err(|e| anyhow!("{e}"))?;
            format!("?after={cursor}")
        }
    })
}

pub fn watch(remote: &Remote, args: &WatchArgs) -> anyhow::Result<u8> {
    let run = path_segment(&args.follow.run)?;
    let query = after_query(args.follow.after.as_deref())?;
    remote.stream(&format!("/runs/{run}/watch{query}"))?;
    Ok(0)
}

pub fn force_stop(remote: &Remote, run: &str) -> anyhow::Result<u8> {
    let run = path_segment(run)?;
    let path = format!("/runs/{run}/force-stop");
    outln!(
        "{}",
        remote.call(reqwest::Method::POST, &path, Some(json!({})))?
    );
    Ok(0)
}

/// The run's checkpoints on the server's host, as the server answers them (JSON).
pub fn checkpoints(remote: &Remote, args: &CheckpointsArgs) -> anyhow::Result<u8> {
    let run = path_segment(&args.run)?;
    let mut path = format!("/runs/{run}/checkpoints?limit={}", args.limit.clamp(1, 100));
    if let Some(after) = args.after {
        path.push_str(&format!("&after={after}"));
    }
    outln!("{}", remote.call(reqwest::Method::GET, &path, None)?);
    Ok(0)
}

/// Revokes the run's authorization (its connection values are never sent again) and removes
/// the worktree it kept on the server's host. A run that kept none (runs on a server work in
/// place) is answered with the revocation alone, when there was one to revoke.
pub fn discard_workspace(remote: &Remote, run: &str) -> anyhow::Result<u8> {
    let run = path_segment(run)?;
    let revoked = authorization::revoke(run)?;
    let path = format!("/runs/{run}/discard-workspace");
    match remote.call(reqwest::Method::POST, &path, Some(json!({}))) {
        Ok(mut answer) => {
            answer["authorizationRevoked"] = json!(revoked);
            outln!("{answer}");
        }
        Err(error)
            if revoked
                && error
                    .downcast_ref::<RemoteProblem>()
                    .is_some_and(|problem| problem.code == "run.no_retained_workspace") =>
        {
            outln!(
                "{}",
                json!({"runId": run, "workspace": null, "authorizationRevoked": revoked})
            );
        }
        Err(error) => return Err(error),
    }
    Ok(0)
}

/// Prunes on the server's host; its report (JSON).
pub fn prune(remote: &Remote, args: &PruneArgs) -> anyhow::Result<u8> {
    let options = json!({"olderThanMs": args.older_than, "dryRun": args.dry_run});
    let report = remote.call(reqwest::Method::POST, "/prune", Some(options))?;
    outln!("{report}");
    Ok(0)
}

pub fn resume(remote: &Remote, args: &ResumeArgs) -> anyhow::Result<u8> {
    let run = path_segment(&args.run)?;
    let path = format!("/runs/{run}/resume");
    let mut options = json!({});
    if let Some(checkpoint) = args.from_checkpoint {
        options["fromCheckpoint"] = json!(checkpoint);
    }
    if args.force {
        options["force"] = json!(true);
    }
    // What the server now requires must be what this run was authorized for, before
    // anything is read from the environment.
    let requirements = remote.call(
        reqwest::Method::GET,
        &format!("/runs/{run}/requirements"),
        None,
    )?;
    let required = required_names(&requirements)?;
    let kept = authorization::load(run)?;
    if !required.is_empty() {
        let Some(kept) = &kept else {
            bail!(
                "run {run} needs {} but no authorization for it is kept here (it was sent \
                 from another machine, or discarded): resume it where it was submitted",
                required.join(", ")
            );
        };
        if kept.target != remote.name || kept.server != remote.base {
            bail!(
                "run {run} was authorized for target {} ({}), not {} ({})",
                kept.target,
                kept.server,
                remote.name,
                remote.base
            );
        }
        let uncovered = kept.uncovered(&required);
        if !uncovered.is_empty() {
            bail!(
                "the server now asks for {} to resume run {run}, which its authorization does \
                 not cover ({}): start a new run instead",
                uncovered.join(", "),
                if kept.variables.is_empty() {
                    "no variables".to_owned()
                } else {
                    kept.variables.join(", ")
                }
            );
        }
    }
    let values = remote.connection_values(&required, args.insecure)?;
    if !values.is_empty() {
        options["connections"] = serde_json::to_value(&values)?;
    }
    let receipt = remote.call(reqwest::Method::POST, &path, Some(options))?;
    outln!("{receipt}");
    std::io::stdout().flush()?;
    let successor = receipt["runId"]
        .as_str()
        .ok_or_else(|| anyhow!("the server's receipt has no runId"))?
        .to_owned();
    // The authorization moves to the successor: the resumed run cannot be resumed again.
    let variables = kept.map_or(required, |kept| kept.variables);
    authorization::save(&Authorization::new(
        &successor,
        &remote.name,
        &remote.base,
        variables,
    ))?;
    authorization::revoke(run)?;
    if args.detach {
        return Ok(0);
    }
    follow(remote, &successor)
}

#[cfg(test)]
mod tests {
    use super::protected;

    #[test]
    fn values_travel_only_over_https_or_to_loopback() {
        for base in [
            "https://build-box:8420",
            "https://10.1.2.3",
            "http://127.0.0.1:8420",
            "http://127.8.0.1",
            "http://localhost:8420",
            "http://[::1]:8420",
        ] {
            assert!(protected(base), "{base}");
        }
        for base in [
            "http://build-box:8420",
            "http://10.1.2.3:8420",
            "http://0.0.0.0:8420",
            "http://[2001:db8::1]",
            "http://localhost.example.com",
            "not a url",
        ] {
            assert!(!protected(base), "{base}");
        }
    }
}
