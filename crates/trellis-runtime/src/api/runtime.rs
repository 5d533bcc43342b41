//! [`Runtime`]: one state directory and its ledger, and every operation on runs.

mod connections;
mod isolation;
mod profiles;
mod reads;
mod remote;
mod revival;
mod workspaces;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use trellis_gap::RunEvent as GapEvent;
use trellis_ledger::{
    LEDGER_ENV, LedgerError, LedgerLocation, RunId, RunKind, RunStore, TerminalResult,
};

use crate::api::options::{
    Receipt, ResumeOptions, RuntimeOptions, StartMode, SubmitOptions, WorkspaceMode,
};
use crate::api::validation::{self, ValidateRequest, ValidationReport};
use crate::control::isolation::{apply_isolation, host_isolation};
use crate::control::recovery::{TerminalReason, finalize_abandoned, finalize_orphaned, reconcile};
use crate::control::spawn::{Launched, Start, controller_env};
use crate::delivery::read_source;
use crate::dispatch::DispatchMode;
use crate::gap_runs::admission::{self as gap_admission, GapOutcome, GapRunRequest};
use crate::gap_runs::launch::{self as gap_launch, GAP_CONTROLLER_ENV, GapLaunch};
use crate::gap_runs::runner as gap_runner;
use crate::graphspec::admission::{self, AdmissionError, AdmitRequest, Admitted, readmit_where};
use crate::graphspec::launch::{LaunchRequest, launch};
use crate::graphspec::preparation::prepare;
use crate::observation::views::RunStatus;
use crate::plan::{Connections, Isolation};
use crate::shared::error::RuntimeError;
use crate::shared::home::{Lease, LeaseAttempt, TrellisHome, default_home};
use crate::shared::submission::{StoredSource, Submission, WorkspaceHandling};
use crate::worker_host::work::{WorkerOptions, WorkerReport};

/// How long `force_stop` waits for a live controller to settle the run.
const STOP_WAIT: Duration = Duration::from_secs(15);
/// How long past its controller lease a run on a shared ledger waits for a serving host to
/// take it over before an observer ends it (`TRELLIS_ABANDONED_AFTER_MS`).
const ABANDONED_AFTER: Duration = Duration::from_secs(30);
const ABANDONED_AFTER_ENV: &str = "TRELLIS_ABANDONED_AFTER_MS";

/// The run API over one state directory and its ledger. Cheap to share (`Arc<Runtime>`):
/// every method takes `&self` and may be called from any thread.
pub struct Runtime {
    home: TrellisHome,
    store: Arc<dyn RunStore>,
    /// The ledger chosen explicitly (option or `$TRELLIS_LEDGER`), handed to controllers.
    ledger: Option<LedgerLocation>,
    controller_program: Option<PathBuf>,
    /// Where this host's controllers run executions; `None`: as `$TRELLIS_DISPATCH` says.
    dispatch: Option<DispatchMode>,
    /// Where this host's controllers run their steps; `None`: as `$TRELLIS_ISOLATION` says.
    isolation: Option<Isolation>,
}

/// Parses a run id given by a person or a client.
pub fn parse_run_id(text: &str) -> Result<RunId, RuntimeError> {
    RunId::new(text).map_err(|e| RuntimeError::InvalidRunId(text.to_owned(), e))
}

impl Runtime {
    /// Opens (creating on first use) the state directory and its ledger.
    pub fn open(options: RuntimeOptions) -> Result<Self, RuntimeError> {
        let root = match options.home {
            Some(root) => root,
            None => default_home().ok_or(RuntimeError::NoHome)?,
        };
        let home = TrellisHome::open(&root).map_err(|e| RuntimeError::StateDirectory {
            path: root.clone(),
            reason: e.to_string(),
        })?;
        let ledger = match options.ledger {
            Some(location) => Some(location),
            None => LedgerLocation::from_env()?,
        };
        let location = ledger
            .clone()
            .unwrap_or_else(|| LedgerLocation::Sqlite(home.ledger_path()));
        let store = location.open().map_err(|cause| match cause {
            // These name the file and say what to do already.
            LedgerError::ReadOnly { .. }
            | LedgerError::DiskFull { .. }
            | LedgerError::CannotOpen { .. }
            | LedgerError::Io { .. } => RuntimeError::Ledger(cause),
            cause => RuntimeError::OpenLedger {
                location: location.to_string(),
                cause,
            },
        })?;
        Ok(Self {
            home,
            store,
            ledger,
            controller_program: options.controller_program,
            dispatch: None,
            isolation: None,
        })
    }

    /// Makes every controller this runtime starts (submitted, resumed or taken over) dispatch
    /// as `mode` says, whatever `$TRELLIS_DISPATCH` holds. Queueing needs a PostgreSQL ledger.
    pub fn with_dispatch(mut self, mode: DispatchMode) -> Result<Self, RuntimeError> {
        if mode == DispatchMode::Queue && !self.is_shared_ledger() {
            return Err(RuntimeError::NotSubmittable(
                "queue dispatch hands executions to `trellis worker` hosts through a \
                 PostgreSQL ledger: give --ledger postgres://… (or use --dispatch local)"
                    .to_owned(),
            ));
        }
        self.dispatch = Some(mode);
        Ok(self)
    }

    /// The state directory.
    pub fn home(&self) -> &Path {
        self.home.root()
    }

    pub(crate) fn home_dir(&self) -> &TrellisHome {
        &self.home
    }

    pub(crate) fn store(&self) -> &dyn RunStore {
        self.store.as_ref()
    }

    /// Admits a graph, its input and its plan (see [`crate::admit`]).
    pub fn admit(&self, request: AdmitRequest) -> Result<Admitted, AdmissionError> {
        admission::admit(request)
    }

    /// Checks a graph without running it (see [`crate::validate`]).
    pub fn validate(&self, request: ValidateRequest) -> Result<ValidationReport, AdmissionError> {
        validation::validate(request)
    }

    /// Creates the run of an admitted graph (or finds the run its submission key already
    /// names) and starts it.
    pub fn submit(
        &self,
        admitted: Admitted,
        options: SubmitOptions,
    ) -> Result<Receipt, RuntimeError> {
        let identity = admitted.identity();
        let (Some(plan), Some(workspace)) = (admitted.plan, admitted.workspace) else {
            return Err(RuntimeError::NotSubmittable(
                "this admission checked no runtime plan, so it cannot run".to_owned(),
            ));
        };
        let connections = admitted.connections;
        let connection_names = plan.connection_names();
        self.check_connections(&connections, &connection_names)?;
        let lookup = connections.lookup(&connection_names);
        if !options.skip_preflight {
            let host = self.isolation.unwrap_or_else(host_isolation);
            let contained = plan.isolation.unwrap_or_default().max(host) == Isolation::Sandbox;
            let problems = crate::plan::preflight::preflight(&plan, &lookup, contained);
            if !problems.is_empty() {
                return Err(RuntimeError::Preflight(problems));
            }
        }
        // What delivery will need (a committed branch, the remote, the forge token) is checked
        // before the run exists, so it never fails there after hours of agent work. Not part
        // of admission: the reference admits such graphs, and `--validate-only` must agree.
        prepare(
            admitted.graph.spec(),
            &plan,
            &workspace,
            &admitted.input,
            &lookup,
        )?;
        // A run admitted on a sandboxing host stays contained wherever it continues (a
        // `trellis resume` without the flag, another host taking it over): its stored plan
        // asks for the sandbox itself.
        let mut plan = plan;
        if self.isolation.unwrap_or_else(host_isolation) == Isolation::Sandbox {
            plan.isolation = Some(Isolation::Sandbox);
        }
        let source = read_source(&workspace);
        let mut handling = WorkspaceHandling {
            checkpoints: options.workspace.checkpoints,
            keep_checkpoints: options.workspace.keep_checkpoints,
            verifier_copies: options.workspace.verifier_copies,
            worktree_of: None,
        };
        let workspace = match options.workspace.mode {
            WorkspaceMode::InPlace => workspace,
            WorkspaceMode::Worktree => {
                let worktree = self.make_worktree(&workspace)?;
                handling.worktree_of = Some(workspace);
                worktree
            }
        };
        let submission = Submission {
            graph: admitted.graph.spec().to_value(),
            input: admitted.input,
            plan,
            workspace,
            source: source.as_ref().map(StoredSource::from),
            template: admitted.template,
            handling,
            from_checkpoint: None,
            caller_connections: connections.caller_names(),
            environment: options.environment.filter(|spec| !spec.is_empty()),
        };
        let title = options
            .title
            .unwrap_or_else(|| first_line(&admitted.default_title));
        let submission_key = options
            .submission_key
            .unwrap_or_else(|| format!("auto-{}", RunId::generate().as_str().replace('-', "")));
        let worktree = submission
            .handling
            .worktree_of
            .clone()
            .map(|origin| (origin, submission.workspace.clone()));
        let start_mode = options.start;
        let launched = self
            .start_with(start_mode, &connection_names, &connections)
            .and_then(|start| {
                self.launch(LaunchRequest {
                    start,
                    submission,
                    title,
                    submission_key,
                    identity,
                    predecessor: None,
                })
            });
        // A worktree made for a run that never started (or that repeated an earlier
        // submission, which has its own) goes again.
        if let Some((origin, made)) = worktree
            && !launched.as_ref().is_ok_and(|receipt| receipt.created)
        {
            self.drop_worktree(&origin, &made);
        }
        self.revive_unstarted(launched?, start_mode, &connections)
    }

    /// How a run is started: `env_names` are the variables its controller is handed besides
    /// the basics (a plan's connection names, a GaP run's secret names and settings).
    fn start(&self, mode: StartMode, env_names: &[String]) -> Result<Start, RuntimeError> {
        self.start_with(mode, env_names, &Connections::default())
    }

    /// As [`Self::start`], the connection variables taking their values from `connections`
    /// (a caller's over this host's), handed to the controller in its environment only.
    fn start_with(
        &self,
        mode: StartMode,
        env_names: &[String],
        connections: &Connections,
    ) -> Result<Start, RuntimeError> {
        if mode == StartMode::InProcess && connections.from_caller_any() {
            // A run on this thread would read this process's environment, not the caller's.
            return Err(RuntimeError::NotSubmittable(
                "a run carrying its caller's connection values runs under a detached controller"
                    .to_owned(),
            ));
        }
        Ok(match mode {
            StartMode::InProcess => Start::InProcess,
            StartMode::Detached => Start::Detached {
                program: match &self.controller_program {
                    Some(program) => program.clone(),
                    None => std::env::current_exe()
                        .map_err(|e| RuntimeError::io("cannot locate the trellis binary", e))?,
                },
                env: {
                    let mut env = controller_env(env_names, connections);
                    crate::dispatch::apply_dispatch(&mut env, self.dispatch);
                    apply_isolation(&mut env, self.isolation);
                    if connections.from_caller_any() && self.queues(&env) {
                        return Err(RuntimeError::NotSubmittable(
                            "this server hands executions to worker hosts (--dispatch queue), \
                             which read connection variables from their own environment: a \
                             run carrying its caller's values needs --dispatch local"
                                .to_owned(),
                        ));
                    }
                    // The controller opens the same ledger (a URL may carry a password: it
                    // travels in the environment only, never in arguments or on disk).
                    if let Some(location) = &self.ledger {
                        let text = match location {
                            LedgerLocation::Sqlite(path) => path.display().to_string(),
                            LedgerLocation::Postgres(url) => url.clone(),
                        };
                        env.retain(|(name, _)| name != LEDGER_ENV);
                        env.push((LEDGER_ENV.to_owned(), text));
                    }
                    env
                },
            },
        })
    }

    fn launch(&self, request: LaunchRequest) -> Result<Receipt, RuntimeError> {
        Ok(match launch(&self.home, &self.store, &request)? {
            Launched::Started(run_id) => Receipt {
                run_id,
                created: true,
            },
            Launched::Existing(run_id) => Receipt {
                run_id,
                created: false,
            },
        })
    }

    /// Validates and runs a GaP workflow in this process while recording it as a run;
    /// `progress` sees every executor event as it happens.
    pub fn run_gap(
        &self,
        request: GapRunRequest,
        progress: &(dyn Fn(&GapEvent) + Send + Sync),
    ) -> Result<GapOutcome, RuntimeError> {
        let mut run = gap_admission::prepare(request)?;
        let workspace = std::env::current_dir()
            .map_err(|e| RuntimeError::io("cannot read the current directory", e))?;
        self.contain_gap(&mut run, &workspace)?;
        gap_runner::run_gap(self.store.clone(), &self.home, run, progress)
    }

    /// Validates a GaP workflow with its tools and creates its run (idempotent on the
    /// submission key), driven like a GraphSpec run: `StartMode::Detached` by a controller
    /// process (returns once it attached), `StartMode::InProcess` on this thread to its end.
    /// Every node body is journaled, so the run can be force-stopped and resumed.
    pub fn submit_gap(
        &self,
        request: GapRunRequest,
        start: StartMode,
    ) -> Result<Receipt, RuntimeError> {
        let run = gap_admission::prepare(request)?;
        let submission_key = run
            .submission_key
            .clone()
            .unwrap_or_else(|| format!("gap-{}", RunId::generate().as_str()));
        let launch = GapLaunch {
            title: run.title.clone(),
            submission_key,
            predecessor: None,
            run,
        };
        let receipt = self.launch_gap(launch, start)?;
        self.revive_unstarted(receipt, start, &Connections::default())
    }

    fn launch_gap(&self, mut launch: GapLaunch, start: StartMode) -> Result<Receipt, RuntimeError> {
        // A detached controller runs the bodies in the workflow's folder and contains them
        // itself; checked here as well, so a host that cannot contain them refuses at once.
        let workspace = match start {
            StartMode::InProcess => std::env::current_dir()
                .map_err(|e| RuntimeError::io("cannot read the current directory", e))?,
            StartMode::Detached => launch.run.workflow.workflow_dir.clone(),
        };
        self.contain_gap(&mut launch.run, &workspace)?;
        let env_names: Vec<String> = GAP_CONTROLLER_ENV
            .iter()
            .map(|name| (*name).to_owned())
            .chain(launch.run.secret_env.iter().cloned())
            .collect();
        let start = self.start(start, &env_names)?;
        Ok(
            match gap_launch::launch(&self.home, &self.store, launch, start)? {
                Launched::Started(run_id) => Receipt {
                    run_id,
                    created: true,
                },
                Launched::Existing(run_id) => Receipt {
                    run_id,
                    created: false,
                },
            },
        )
    }

    /// Checks the run exists and finalizes it `runtime_lost` if its controller is gone, so
    /// nothing ever reports a dead run as running.
    pub(crate) fn known(&self, run_id: &RunId) -> Result<(), RuntimeError> {
        self.store.head(run_id)?;
        reconcile(self.store.as_ref(), &self.home, run_id)?;
        self.end_if_abandoned(run_id)
    }

    /// On a shared ledger, a run whose controller lease expired [`ABANDONED_AFTER`] ago was
    /// taken over by no serving host (a team without one, or all of them down): whoever
    /// observes it takes its lease and ends it `runtime_lost`, so it never reads `running`
    /// for ever. A serving host, when there is one, takes such runs over well before.
    pub(crate) fn end_if_abandoned(&self, run_id: &RunId) -> Result<(), RuntimeError> {
        let Some(postgres) = self.store.as_postgres() else {
            return Ok(());
        };
        let after = crate::dispatch::lease_setting(ABANDONED_AFTER_ENV, ABANDONED_AFTER);
        if !postgres.controller_abandoned(run_id, after)? {
            return Ok(());
        }
        let observer = crate::dispatch::holder_name("observer");
        let Some(lease) = postgres.acquire_controller(run_id, &observer, STOP_WAIT)? else {
            return Ok(());
        };
        let fenced = crate::dispatch::FencedStore::new(self.store.clone(), lease.fencing_token);
        finalize_abandoned(&fenced, run_id)?;
        Ok(())
    }

    /// Stops a run now: its active executions are cancelled (their process groups killed) and
    /// it ends `force_stopped`. A run whose controller is already gone is finalized directly.
    pub fn force_stop(&self, run_id: &RunId) -> Result<RunStatus, RuntimeError> {
        let head = self.store.head(run_id)?;
        if !head.is_finished() && self.store.as_postgres().is_some() {
            self.force_stop_shared(run_id)?;
        } else if !head.is_finished() {
            let lease_path = self
                .home
                .controller_lease_path(run_id.as_str())
                .map_err(|e| RuntimeError::io("cannot open the run directory", e))?;
            let attempt = Lease::try_acquire(&lease_path)
                .map_err(|e| RuntimeError::io("cannot check the controller lease", e))?;
            match attempt {
                LeaseAttempt::Acquired(lease) => {
                    if finalize_orphaned(self.store.as_ref(), run_id, TerminalReason::ForceStopped)?
                    {
                        crate::control::recovery::remove_dead_copies(&self.home, run_id);
                        crate::control::recovery::stop_dead_services(&self.home, run_id);
                    }
                    drop(lease);
                }
                LeaseAttempt::HeldElsewhere => {
                    let head = self.store.request_force_stop(run_id)?;
                    if let Some(controller) = &head.progress.controller {
                        crate::control::recovery::wake_controller(controller.pid, run_id);
                    }
                    self.wait_finished(run_id)?;
                }
            }
        }
        self.status(run_id)
    }

    /// Force-stop on a shared ledger: the controller lease row says whether anyone drives the
    /// run. Taking it fences a controller that is gone, so the run is ended here; while a
    /// live controller holds it, the request is recorded for that controller to act on.
    fn force_stop_shared(&self, run_id: &RunId) -> Result<(), RuntimeError> {
        let taken = match self.store.as_postgres() {
            Some(postgres) => postgres.acquire_controller(
                run_id,
                &crate::dispatch::holder_name("force-stop"),
                STOP_WAIT,
            )?,
            None => None,
        };
        match taken {
            Some(lease) => {
                let fenced =
                    crate::dispatch::FencedStore::new(self.store.clone(), lease.fencing_token);
                finalize_orphaned(&fenced, run_id, TerminalReason::ForceStopped)?;
            }
            None => {
                let head = self.store.request_force_stop(run_id)?;
                if let Some(controller) = &head.progress.controller {
                    crate::control::recovery::wake_controller(controller.pid, run_id);
                }
                self.wait_finished(run_id)?;
            }
        }
        Ok(())
    }

    fn wait_finished(&self, run_id: &RunId) -> Result<(), RuntimeError> {
        let deadline = Instant::now() + STOP_WAIT;
        while Instant::now() < deadline {
            if self.store.head(run_id)?.is_finished() {
                return Ok(());
            }
            reconcile(self.store.as_ref(), &self.home, run_id)?;
            std::thread::sleep(Duration::from_millis(25));
        }
        Ok(())
    }

    /// Starts a successor of a failed run: same graph, input and plan, admitted again; every
    /// genuinely settled outcome of its lineage is reused, only what never settled runs.
    pub fn resume(&self, run_id: &RunId, options: ResumeOptions) -> Result<Receipt, RuntimeError> {
        self.resume_with(run_id, options, Connections::default())
    }

    /// As [`Self::resume`], the successor's connection variables taking their values from
    /// `connections` (a caller's, sent again with the resumption, over this host's).
    pub fn resume_with(
        &self,
        run_id: &RunId,
        options: ResumeOptions,
        connections: Connections,
    ) -> Result<Receipt, RuntimeError> {
        self.known(run_id)?;
        let head = self.store.head(run_id)?;
        match &head.progress.terminal {
            None => return Err(RuntimeError::StillActive(run_id.to_string())),
            Some(TerminalResult::Succeeded { .. }) => {
                return Err(RuntimeError::NothingToResume(run_id.to_string()));
            }
            Some(TerminalResult::Failed { .. }) => {}
        }
        if let Some(successor) = &head.successor {
            return Err(RuntimeError::AlreadyResumed {
                run: run_id.to_string(),
                successor: successor.to_string(),
            });
        }
        let record = self.store.record(run_id)?;
        if record.kind == RunKind::Gap {
            if options.from_checkpoint.is_some() {
                return Err(RuntimeError::NoCheckpoints(run_id.to_string()));
            }
            if connections.from_caller_any() {
                return Err(RuntimeError::NotSubmittable(
                    "a GaP run takes no caller connection values".to_owned(),
                ));
            }
            let run = gap_admission::readmit(&record.submission, run_id.as_str())?;
            return self.launch_gap(
                GapLaunch {
                    run,
                    title: record.title.clone(),
                    submission_key: format!("resume-{}", run_id.as_str()),
                    predecessor: Some(run_id.clone()),
                },
                options.start,
            );
        }
        let mut admitted = readmit_where(&record.submission, run_id.as_str(), &|name| {
            connections.value(name).is_some()
        })?;
        let connection_names = admitted.submission.plan.connection_names();
        self.check_connections(&connections, &connection_names)?;
        admitted.submission.caller_connections = connections.caller_names();
        admitted.submission.from_checkpoint = self.prepare_resume(
            run_id,
            &admitted.submission,
            options.from_checkpoint,
            options.force,
        )?;
        self.launch(LaunchRequest {
            start: self.start_with(options.start, &connection_names, &connections)?,
            title: record.title.clone(),
            submission_key: format!("resume-{}", run_id.as_str()),
            identity: admitted.identity,
            predecessor: Some(run_id.clone()),
            submission: admitted.submission,
        })
    }

    /// The body of a detached controller process (`PROGRAM __controller RUN`, started by
    /// `submit` and `resume`): drives the run to its end. Never call it otherwise: it expects
    /// the leases its starter handed down.
    pub fn run_controller(&self, run_id: &RunId) -> Result<(), RuntimeError> {
        if let (Some(ledger), Some(relay)) = (
            self.store.as_postgres(),
            crate::control::lease::inherited_note_relay(),
        ) {
            ledger.listen_through(relay);
        }
        let record = self.store.record(run_id)?;
        if record.kind == RunKind::Gap {
            let isolation = self.isolation.unwrap_or_else(host_isolation);
            return gap_launch::run_detached(
                self.store.clone(),
                run_id,
                &record,
                isolation,
                self.home.root(),
            );
        }
        crate::graphspec::controller::run_detached(&self.home, self.store.clone(), run_id, record)
    }

    /// Whether the ledger is shared by hosts (PostgreSQL): runs are then held by lease rows,
    /// and a serving host takes over those whose controller is gone.
    pub fn is_shared_ledger(&self) -> bool {
        self.store.as_postgres().is_some()
    }

    /// The `trellis` program controllers and step guards run as: the one this runtime was
    /// given, else this process's own executable.
    fn trellis_program(&self) -> Result<std::path::PathBuf, RuntimeError> {
        match &self.controller_program {
            Some(program) => Ok(program.clone()),
            None => std::env::current_exe()
                .map_err(|e| RuntimeError::io("cannot locate the trellis binary", e)),
        }
    }

    /// From now on every child this process starts through the process runner (git of a
    /// checkpoint restore, a worker host's steps) is watched by one watchdog process of this
    /// program that kills the child's process group once this process is gone, however it
    /// died: a killed `trellis resume` leaves no git rewriting the work tree. Detached
    /// controllers are not children of this kind and live on.
    pub fn tie_children_to_this_process(&self) -> Result<(), RuntimeError> {
        trellis_process::die_with_this_process(self.trellis_program()?)
            .map_err(RuntimeError::ChildWatchdog)
    }

    /// Works as a worker host (`trellis worker`) until `stop` is cancelled: claims queued
    /// executions from this runtime's PostgreSQL ledger and reports their outcomes.
    pub async fn work(
        &self,
        options: WorkerOptions,
        stop: tokio_util::sync::CancellationToken,
    ) -> Result<WorkerReport, RuntimeError> {
        // A step of a worker host must not outlive it (beside the copy the run dispatches
        // again once the claim expires).
        self.tie_children_to_this_process()?;
        crate::worker_host::work::work(self.store.clone(), options, stop).await
    }

    /// Starts a detached controller, on this host, for each run of the shared ledger whose
    /// controller is gone (its lease expired, or it never came up within `grace`); returns
    /// the runs it started controllers for. Each controller takes the run's lease itself, so
    /// when several hosts try at once exactly one drives the run.
    pub fn take_over_orphans(&self, grace: Duration) -> Result<Vec<RunId>, RuntimeError> {
        let program = self.trellis_program()?;
        crate::dispatch::takeover::take_over_orphans(
            &self.home,
            &self.store,
            &program,
            self.ledger.as_ref(),
            self.dispatch,
            self.isolation,
            grace,
        )
    }
}

/// A run title from free text: its first line, without control characters, at most 120
/// characters.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("run").trim();
    let title: String = line.chars().filter(|c| !c.is_control()).take(120).collect();
    if title.is_empty() {
        "run".to_owned()
    } else {
        title
    }
}
