//! `trellis worker`: a host that claims queued node executions from a PostgreSQL ledger, runs
//! each through the harness its binding names (commands and agent CLIs, started by
//! `trellis-process`), renews its claim and pushes the execution's log lines while it runs,
//! and reports the outcome under the claim's fencing token. A worker whose claim expired is refused (`lease.fenced`): it stops
//! the execution and its late outcome stores nothing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use trellis_agents::{Binding, ExecHarness, ExecutionRequest, Harness, Isolation, SecretEnv};
use trellis_graph::{NodeName, WorkerErrorCode, WorkerOutcome};
use trellis_ledger::postgres::dispatch_notes::{DispatchNote, DispatchWaiter};
use trellis_ledger::postgres::leases::Claim;
use trellis_ledger::postgres::logs::DispatchLog;
use trellis_ledger::{LedgerError, LogLevel, LogStream, RunId, RunStore, TokenUsage};

use super::live_logs::{LiveLogs, PUSH_EVERY, Pushed};
use super::private_workspace::{PrivateWorkspace, WorkspaceServer, fetch};
use crate::control::isolation::plan_sandbox;
use crate::dispatch::queued::{DispatchPayload, QueuedOutcome};
use crate::graphspec::admission::readmit;
use crate::graphspec::harnesses::agent_harness;
use crate::graphspec::supervisor::{NodeFacts, node_facts};
use crate::plan::RuntimePlan;
use crate::shared::error::RuntimeError;

/// How many runs' admitted plans a worker host keeps.
const MAX_CACHED_RUNS: usize = 64;

/// How a worker host works.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Executions run at once.
    pub slots: usize,
    /// Which queued executions it takes: `command`, `claude`, `codex`, `copilot`, `pi`.
    pub harnesses: Vec<String>,
    /// How long a claim lives without a heartbeat (renewed every third of it).
    pub lease: Duration,
    /// How long it waits between looks at an empty queue.
    pub poll: Duration,
    /// Where agent executions get their private directories (and executions their private
    /// workspaces, with `server`).
    pub scratch: PathBuf,
    /// The serving host to fetch each execution's workspace from and return its result to;
    /// `None`: the workspace is a path this host shares with the serving host.
    pub server: Option<WorkspaceServer>,
    /// Where steps run (`--isolation`); combined with each plan's to the stricter.
    pub isolation: Isolation,
    /// This host's Trellis home, which a sandbox hides from every step.
    pub trellis_home: PathBuf,
}

/// What a worker host did, for its exit report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport {
    pub completed: u64,
    /// Outcomes the ledger refused because the claim had expired or been withdrawn.
    pub fenced: u64,
}

/// A run's plan and node facts, admitted once per worker host.
struct RunFacts {
    plan: RuntimePlan,
    nodes: HashMap<NodeName, NodeFacts>,
    agent: Option<Arc<dyn Harness>>,
    command: Arc<dyn Harness>,
}

/// Claims and runs executions until `stop` is cancelled; then stops claiming, cancels what
/// runs (their claims expire and their controllers settle them `worker_lost`) and returns.
pub(crate) async fn work(
    store: Arc<dyn RunStore>,
    options: WorkerOptions,
    stop: CancellationToken,
) -> Result<WorkerReport, RuntimeError> {
    if store.as_postgres().is_none() {
        return Err(RuntimeError::Internal(
            "worker hosts need a PostgreSQL ledger (--ledger postgres://…)".into(),
        ));
    }
    let name = crate::dispatch::holder_name("worker");
    let facts: Arc<Mutex<HashMap<RunId, Arc<RunFacts>>>> = Arc::default();
    let mut running = JoinSet::new();
    let mut report = WorkerReport::default();
    let slots = options.slots.max(1);
    // Subscribed before the first claim, so a dispatch queued after any claim wakes a wait.
    let queued_waiter = {
        let store = Arc::clone(&store);
        tokio::task::spawn_blocking(move || {
            store
                .as_postgres()
                .and_then(|postgres| postgres.dispatch_waiter(DispatchNote::Queued).ok())
        })
        .await
        .ok()
        .flatten()
    };
    let mut note_wait: Option<tokio::task::JoinHandle<()>> = None;
    let (reports, reported) = mpsc::unbounded_channel();
    let reporter = tokio::spawn(report_outcomes(Arc::clone(&store), reported));
    loop {
        while let Some(done) = running.try_join_next() {
            tally(&mut report, done);
        }
        if stop.is_cancelled() {
            break;
        }
        let free = slots.saturating_sub(running.len());
        let claims = if free == 0 {
            Vec::new()
        } else {
            let (store, name, harnesses, lease) = (
                store.clone(),
                name.clone(),
                options.harnesses.clone(),
                options.lease,
            );
            tokio::task::spawn_blocking(move || {
                let kinds: Vec<&str> = harnesses.iter().map(String::as_str).collect();
                store
                    .as_postgres()
                    .map_or(Ok(Vec::new()), |p| p.claim(&name, &kinds, free, lease))
            })
            .await
            .map_err(|_| RuntimeError::Internal("the claiming thread failed".into()))?
            .unwrap_or_else(|error| {
                eprintln!("trellis worker: cannot claim: {error}");
                Vec::new()
            })
        };
        let claimed = !claims.is_empty();
        for claim in claims {
            let job = Job {
                store: store.clone(),
                facts: facts.clone(),
                lease: options.lease,
                scratch: options.scratch.clone(),
                server: options.server.clone(),
                isolation: options.isolation,
                trellis_home: options.trellis_home.clone(),
                worker: name.clone(),
                stop: stop.clone(),
                reports: reports.clone(),
            };
            running.spawn(job.run(claim));
        }
        if claimed && running.len() < slots {
            continue;
        }
        // Woken by the ledger's note of a new dispatch (or, at the latest, after `poll`). One
        // wait at a time, kept across turns, so a note it takes always leads to a claim.
        let wait = note_wait.get_or_insert_with(|| {
            tokio::spawn(wait_for_queued(
                Arc::clone(&store),
                queued_waiter.clone(),
                options.poll,
            ))
        });
        let mut noted = false;
        tokio::select! {
            () = stop.cancelled() => {}
            _ = wait => noted = true,
            Some(done) = running.join_next(), if !running.is_empty() => tally(&mut report, done),
        }
        if noted {
            note_wait = None;
        }
    }
    if let Some(wait) = note_wait {
        wait.abort();
    }
    while let Some(done) = running.join_next().await {
        tally(&mut report, done);
    }
    // Every job has had its answer; the reporter ends with its last sender.
    drop(reports);
    let _ = reporter.await;
    Ok(report)
}

/// Waits until the ledger notes a new dispatch or `poll` passes (a plain sleep where the store
/// cannot wait for notes).
async fn wait_for_queued(store: Arc<dyn RunStore>, waiter: Option<DispatchWaiter>, poll: Duration) {
    let Some(waiter) = waiter else {
        return tokio::time::sleep(poll).await;
    };
    let waited = tokio::task::spawn_blocking(move || {
        store
            .as_postgres()
            .map(|postgres| postgres.wait_for_note(&waiter, poll))
    })
    .await;
    if !matches!(waited, Ok(Some(Ok(_)))) {
        tokio::time::sleep(poll).await;
    }
}

fn tally(report: &mut WorkerReport, done: Result<bool, tokio::task::JoinError>) {
    match done {
        Ok(true) => report.completed += 1,
        Ok(false) | Err(_) => report.fenced += 1,
    }
}

/// One claimed execution.
struct Job {
    store: Arc<dyn RunStore>,
    facts: Arc<Mutex<HashMap<RunId, Arc<RunFacts>>>>,
    lease: Duration,
    scratch: PathBuf,
    server: Option<WorkspaceServer>,
    isolation: Isolation,
    trellis_home: PathBuf,
    worker: String,
    stop: CancellationToken,
    reports: mpsc::UnboundedSender<Report>,
}

/// An outcome to report, and who waits for the ledger's answer.
type Report = (Claim, String, oneshot::Sender<Result<(), LedgerError>>);

/// Most outcomes one report carries.
const MAX_REPORT: usize = 64;
/// How long a report waits for more outcomes after its first: on a busy host a few more join
/// it (one commit instead of several, each waking every listener of the ledger); an idle host
/// pays it once per outcome.
const REPORT_LINGER: Duration = Duration::from_millis(1);

/// Reports outcomes to the ledger: those that finish while a report is in flight (or within
/// [`REPORT_LINGER`] of the first) go together in one transaction, one wake-up of the
/// listeners, so a busy host reports in batches.
async fn report_outcomes(store: Arc<dyn RunStore>, mut reports: mpsc::UnboundedReceiver<Report>) {
    while let Some(first) = reports.recv().await {
        let mut batch = vec![first];
        let until = tokio::time::Instant::now() + REPORT_LINGER;
        while batch.len() < MAX_REPORT {
            match tokio::time::timeout_at(until, reports.recv()).await {
                Ok(Some(more)) => batch.push(more),
                _ => break,
            }
        }
        let (outcomes, waiters): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|(claim, json, waiter)| ((claim, json), waiter))
            .unzip();
        let store = Arc::clone(&store);
        let answered = tokio::task::spawn_blocking(move || {
            store
                .as_postgres()
                .map(|postgres| postgres.complete_many(outcomes))
        })
        .await;
        let answers: Vec<Result<(), LedgerError>> = match answered {
            Ok(Some(Ok(answers))) => answers,
            Ok(Some(Err(error))) => vec![Err(error); waiters.len()],
            _ => vec![
                Err(LedgerError::Internal {
                    detail: "the reporting thread failed".to_owned(),
                });
                waiters.len()
            ],
        };
        for (waiter, answer) in waiters.into_iter().zip(answers) {
            let _ = waiter.send(answer);
        }
    }
}

impl Job {
    /// Runs the claim to its reported outcome; false when the ledger refused it (fenced).
    async fn run(self, claim: Claim) -> bool {
        let cancel = self.stop.child_token();
        let fenced = Arc::new(AtomicBool::new(false));
        let heartbeat = tokio::spawn(heartbeat(
            self.store.clone(),
            claim.clone(),
            self.lease,
            cancel.clone(),
            fenced.clone(),
        ));
        let reported = self.execute(&claim, cancel.clone(), &fenced).await;
        heartbeat.abort();
        if fenced.load(Ordering::Relaxed) || self.stop.is_cancelled() {
            // The claim is gone (or we are stopping): whatever we have is not ours to report.
            return false;
        }
        let json = match serde_json::to_string(&reported) {
            Ok(json) => json,
            Err(_) => return false,
        };
        let (answer, answered) = oneshot::channel();
        if self.reports.send((claim, json, answer)).is_err() {
            return false;
        }
        match answered.await {
            Ok(Ok(())) => true,
            Ok(Err(LedgerError::Fenced { detail })) => {
                eprintln!("trellis worker: outcome refused (lease.fenced): {detail}");
                false
            }
            Ok(Err(error)) => {
                eprintln!("trellis worker: cannot report an outcome: {error}");
                false
            }
            Err(_) => false,
        }
    }

    async fn run_facts(&self, run_id: &RunId) -> Result<Arc<RunFacts>, String> {
        if let Some(known) = self.facts.lock().ok().and_then(|f| f.get(run_id).cloned()) {
            return Ok(known);
        }
        let (store, id) = (self.store.clone(), run_id.clone());
        let admitted = tokio::task::spawn_blocking(move || {
            let record = store.record(&id).map_err(|e| e.to_string())?;
            readmit(&record.submission, id.as_str()).map_err(|e| e.to_string())
        })
        .await
        .map_err(|_| "the admission thread failed".to_owned())??;
        let plan = admitted.submission.plan.clone();
        // A worker that cannot contain the run's steps as asked runs none of them.
        let sandbox =
            plan_sandbox(&plan, self.isolation, &self.trellis_home).map_err(|e| e.to_string())?;
        let agent = agent_harness(&plan, sandbox.as_ref()).ok().flatten();
        let facts = Arc::new(RunFacts {
            nodes: node_facts(admitted.graph.spec()),
            plan,
            agent,
            command: Arc::new(ExecHarness::contained(sandbox)),
        });
        if let Ok(mut cache) = self.facts.lock() {
            if cache.len() >= MAX_CACHED_RUNS {
                cache.clear();
            }
            cache.insert(run_id.clone(), facts.clone());
        }
        Ok(facts)
    }

    async fn execute(
        &self,
        claim: &Claim,
        cancel: CancellationToken,
        fenced: &AtomicBool,
    ) -> QueuedOutcome {
        let refuse = |message: String| QueuedOutcome {
            outcome: WorkerOutcome::failure(WorkerErrorCode::Crash),
            usage: TokenUsage::default(),
            killed_from_outside: None,
            logs: vec![DispatchLog {
                stream: LogStream::System,
                level: LogLevel::Error,
                message,
            }],
            worker: self.worker.clone(),
            result: None,
            fetched_workspace: self.server.is_some(),
        };
        let payload: DispatchPayload = match serde_json::from_str(&claim.payload_json) {
            Ok(payload) => payload,
            Err(e) => return refuse(format!("unreadable dispatch: {e}")),
        };
        let facts = match self.run_facts(&claim.run_id).await {
            Ok(facts) => facts,
            Err(why) => return refuse(format!("cannot admit the run on this worker: {why}")),
        };
        let node = match NodeName::new(&claim.node) {
            Ok(node) => node,
            Err(_) => return refuse(format!("unknown node {:?}", claim.node)),
        };
        let (Some(known), Some(binding)) = (facts.nodes.get(&node), facts.plan.nodes.get(&node))
        else {
            return refuse(format!("node {node} has no binding or contract"));
        };
        let harness: Arc<dyn Harness> = match binding {
            Binding::Command(_) => facts.command.clone(),
            Binding::Agent(_) => match &facts.agent {
                Some(agent) => agent.clone(),
                None => return refuse("no agent CLI for this run's plan on this worker".into()),
            },
            Binding::GitDelivery(_) => {
                return refuse("delivery runs on the controller's host, not a worker".into());
            }
        };
        let scratch = self
            .scratch
            .join(claim.run_id.as_str())
            .join(claim.execution.to_string());
        let private = match &self.server {
            Some(server) => {
                let root = scratch.with_extension("workspace");
                match fetch(server, claim, root).await {
                    Ok(private) => Some(private),
                    Err(why) => return refuse(format!("cannot fetch the run's workspace: {why}")),
                }
            }
            None if !payload.workspace.is_dir() => {
                return refuse(format!(
                    "the run's workspace {} is not on this host (start the worker with --server \
                     to fetch it from the serving host)",
                    payload.workspace.display()
                ));
            }
            None => None,
        };
        let workspace = private
            .as_ref()
            .map_or_else(|| payload.workspace.clone(), |p| p.workdir.clone());
        let uses_scratch = matches!(binding, Binding::Agent(_));
        if uses_scratch && let Err(e) = std::fs::create_dir_all(&scratch) {
            return refuse(format!("cannot create scratch space: {e}"));
        }
        // Values of the variables the plan names come from this host's environment.
        let secrets = SecretEnv::new(
            facts
                .plan
                .connection_names()
                .into_iter()
                .filter_map(|name| std::env::var(&name).ok().map(|value| (name, value)))
                .collect(),
        );
        let request = ExecutionRequest {
            run_id: claim.run_id.as_str().to_owned(),
            node,
            execution: claim.execution,
            node_instance: payload.node_instance,
            attempt: payload.attempt,
            input: payload.input,
            instructions: known.instructions.clone(),
            contract: known.contract.clone(),
            idle_timeout: binding.idle_timeout_ms().map(Duration::from_millis),
            binding: binding.clone(),
            workspace,
            scratch: scratch.clone(),
            deadline: known.timeout_ms.map(Duration::from_millis),
            environment: secrets,
            base_env: ["PATH", "HOME", "LANG", "TMPDIR"]
                .iter()
                .chain(trellis_agents::access::AGENT_CONFIG_ENV.iter())
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
                .collect(),
        };
        let (tx, mut rx) = mpsc::channel(1024);
        let run = harness.execute(request, tx, cancel.clone());
        tokio::pin!(run);
        let mut logs = LiveLogs::new(self.store.clone(), claim.clone());
        let mut tick = tokio::time::interval(PUSH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let fence = |pushed: Pushed| {
            if pushed == Pushed::Fenced {
                // As when a heartbeat is refused: the claim is gone, so is the execution.
                fenced.store(true, Ordering::Relaxed);
                cancel.cancel();
            }
        };
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                Some(event) = rx.recv() => logs.take(event),
                pushed = logs.pushed(), if logs.is_pushing() => fence(pushed),
                _ = tick.tick() => logs.tick(),
            }
        };
        while let Some(event) = rx.recv().await {
            logs.take(event);
        }
        // The last lines go before the outcome, so the controller records them first.
        fence(logs.flush().await);
        if uses_scratch {
            let _ = std::fs::remove_dir_all(&scratch);
        }
        let mut outcome = result.outcome;
        let usage = logs.usage;
        let mut lines = logs.finish();
        let fetched_workspace = private.is_some();
        let returned = match private {
            Some(private) if !cancel.is_cancelled() => {
                self.return_result(&private, claim, &mut outcome, &mut lines)
                    .await
            }
            _ => None,
        };
        QueuedOutcome {
            outcome,
            usage,
            killed_from_outside: result.killed_from_outside,
            logs: lines,
            worker: self.worker.clone(),
            result: returned,
            fetched_workspace,
        }
    }
}

impl Job {
    /// Returns the private workspace's result to the serving host; when it cannot, the
    /// execution fails (`crash`) with the reason in its log rather than lose its changes.
    async fn return_result(
        &self,
        private: &PrivateWorkspace,
        claim: &Claim,
        outcome: &mut WorkerOutcome,
        lines: &mut Vec<DispatchLog>,
    ) -> Option<String> {
        let server = self.server.as_ref()?;
        match private.return_result(server, claim).await {
            Ok(commit) => commit,
            Err(why) => {
                *outcome = WorkerOutcome::failure(WorkerErrorCode::Crash);
                lines.push(DispatchLog {
                    stream: LogStream::System,
                    level: LogLevel::Error,
                    message: format!("cannot return the workspace to the serving host: {why}"),
                });
                None
            }
        }
    }
}

/// Renews the claim every third of its lease; once the ledger refuses (the claim expired or
/// was withdrawn), cancels the execution.
async fn heartbeat(
    store: Arc<dyn RunStore>,
    mut claim: Claim,
    lease: Duration,
    cancel: CancellationToken,
    fenced: Arc<AtomicBool>,
) {
    loop {
        tokio::time::sleep(lease / 3).await;
        let (store, current) = (store.clone(), claim.clone());
        let renewed = tokio::task::spawn_blocking(move || {
            store
                .as_postgres()
                .map(|postgres| postgres.heartbeat(&current, lease))
        })
        .await;
        match renewed {
            Ok(Some(Ok(renewed))) => claim = renewed,
            Ok(Some(Err(LedgerError::Fenced { .. }))) => {
                fenced.store(true, Ordering::Relaxed);
                cancel.cancel();
                return;
            }
            // A ledger hiccup: the claim may still be live; try again next tick.
            _ => {}
        }
    }
}
