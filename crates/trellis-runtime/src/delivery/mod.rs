//! Delivery verifiers, executed by the runtime (never by an agent): `push` commits and pushes
//! the run branch, `pr` opens or updates its pull request and reports review feedback and
//! checks, `merge` merges it when green, `comment` posts or edits one report comment.

mod feedback_log;
mod forge;
mod git;
mod settings;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    Binding, BoxFuture, DeliveryBinding, EventSink, ExecutionRequest, ExecutionResult, Harness,
    HarnessEvent, LogStream, TokenUsage,
};
use trellis_graph::{GraphNode, GraphSpec, NodeName, WorkerErrorCode, WorkerOutcome, WorkerRef};

pub(crate) use git::git_blocking;
use git::{DeliveryFailure, Git, crash, delivery_env, push_run_branch};
pub use git::{SourceRevision, read_source, run_branch, without_userinfo};
pub use settings::{ForgeSettings, parse_remote};

/// What a delivery node does, read from its worker reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeliveryKind {
    Push,
    /// `pr@1` reports `opened`; `pr@2` waits for checks and reports feedback.
    PullRequest {
        version: u8,
    },
    Merge {
        version: u8,
    },
    Comment,
}

impl DeliveryKind {
    pub(crate) fn of(worker: &str) -> Option<DeliveryKind> {
        Some(match worker {
            "builtin.git-delivery.push@1" => Self::Push,
            "builtin.git-delivery.pr@1" => Self::PullRequest { version: 1 },
            "builtin.git-delivery.pr@2" => Self::PullRequest { version: 2 },
            "builtin.git-delivery.merge@1" => Self::Merge { version: 1 },
            "builtin.git-delivery.merge@2" => Self::Merge { version: 2 },
            "builtin.git-delivery.merge@3" => Self::Merge { version: 3 },
            "builtin.comment-delivery.post@1" => Self::Comment,
            _ => return None,
        })
    }

    /// Whether this delivery talks to the forge (and so needs its token).
    pub(crate) fn uses_forge(self) -> bool {
        !matches!(self, Self::Push)
    }

    /// Whether this delivery pushes the run branch (and so needs a clean, attached branch).
    pub(crate) fn pushes(self) -> bool {
        !matches!(self, Self::Comment)
    }
}

/// Runs the delivery verifiers of one run.
#[derive(Debug, Clone)]
pub struct GitDelivery {
    source: Option<SourceRevision>,
    /// The worker of each delivery node (a node not listed pushes).
    workers: BTreeMap<NodeName, WorkerRef>,
    /// The first run id of the lineage: names the run branch and the report marker, so a
    /// resumed run finds the pull request and comment its predecessor made.
    lineage_key: Option<String>,
    forge: ForgeSettings,
}

impl GitDelivery {
    pub fn new(source: Option<SourceRevision>) -> Self {
        Self {
            source,
            workers: BTreeMap::new(),
            lineage_key: None,
            forge: ForgeSettings::default(),
        }
    }

    /// The workers of the graph's delivery nodes.
    pub fn with_workers(mut self, workers: BTreeMap<NodeName, WorkerRef>) -> Self {
        self.workers = workers;
        self
    }

    /// The id that stays the same across a run's resumes (its lineage's first run).
    pub fn with_lineage_key(mut self, key: &str) -> Self {
        self.lineage_key = Some(key.to_owned());
        self
    }

    pub fn with_forge(mut self, forge: ForgeSettings) -> Self {
        self.forge = forge;
        self
    }

    fn kind(&self, node: &NodeName) -> DeliveryKind {
        self.workers
            .get(node)
            .and_then(|w| DeliveryKind::of(w.as_str()))
            .unwrap_or(DeliveryKind::Push)
    }

    fn lineage_key<'a>(&'a self, request: &'a ExecutionRequest) -> &'a str {
        self.lineage_key.as_deref().unwrap_or(&request.run_id)
    }
}

impl Harness for GitDelivery {
    fn name(&self) -> &str {
        "git-delivery"
    }

    fn execute<'a>(
        &'a self,
        request: ExecutionRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ExecutionResult> {
        Box::pin(async move {
            let redactor = request.environment.redactor();
            let log = |message: String| {
                let _ = events.try_send(HarnessEvent::Log {
                    stream: LogStream::System,
                    level: LogStream::System.default_level(),
                    message: redactor.apply(&message),
                });
            };
            let delivered = tokio::select! {
                delivered = self.deliver(&request, &cancel, &log) => delivered,
                () = cancel.cancelled() => Err(DeliveryFailure {
                    code: WorkerErrorCode::Refusal,
                    message: "delivery cancelled".into(),
                }),
            };
            let outcome = match delivered {
                Ok(receipt) => request.contract.accept(&receipt).unwrap_or_else(|reason| {
                    log(format!(
                        "delivery receipt does not match the node contract: {reason}"
                    ));
                    WorkerOutcome::failure(WorkerErrorCode::Malformed)
                }),
                Err(failure) => {
                    log(format!("delivery: {}", failure.message));
                    WorkerOutcome::failure(failure.code)
                }
            };
            ExecutionResult::settled(outcome, TokenUsage::default())
        })
    }
}

impl GitDelivery {
    async fn deliver(
        &self,
        request: &ExecutionRequest,
        cancel: &CancellationToken,
        log: &(dyn Fn(String) + Sync),
    ) -> Result<Value, DeliveryFailure> {
        let Binding::GitDelivery(binding) = &request.binding else {
            return Err(crash("git delivery received a non-delivery binding".into()));
        };
        let kind = self.kind(&request.node);
        if kind == DeliveryKind::Comment {
            return forge::post_comment(self, request, binding, log).await;
        }
        let source = self
            .source
            .clone()
            .ok_or_else(|| crash("the run did not start in a git repository".into()))?;
        let remote = binding.remote.clone().unwrap_or_else(|| "origin".into());
        let git = Git {
            workspace: &request.workspace,
            env: delivery_env(request),
            redactor: request.environment.redactor(),
            cancel,
        };
        let branch = run_branch(self.lineage_key(request));
        let pushed = push_run_branch(&git, request, &source, &branch, &remote, log).await?;
        match kind {
            DeliveryKind::Push => Ok(json!({
                "output": {
                    "version": "v1",
                    "mode": "push",
                    "outcome": "pushed",
                    "repository": pushed.push_url,
                    "targetBranch": pushed.target_branch,
                    "headRevision": pushed.head,
                    "headBranch": pushed.branch,
                },
                "signals": {"delivery": "pushed"},
                "diagnostic": {"message": format!("pushed {} at {}", pushed.branch, pushed.head)},
            })),
            DeliveryKind::PullRequest { .. } | DeliveryKind::Merge { .. } => {
                forge::deliver_pull(self, request, binding, kind, &git, &pushed, log).await
            }
            DeliveryKind::Comment => Err(crash("comment delivery pushes nothing".into())),
        }
    }
}

/// The worker of every delivery node of `graph`.
pub(crate) fn delivery_workers(graph: &GraphSpec) -> BTreeMap<NodeName, WorkerRef> {
    let mut workers = BTreeMap::new();
    graph.root.walk(&mut |node: &GraphNode| {
        if let Some(exec) = node.executable()
            && DeliveryKind::of(exec.worker.as_str()).is_some()
        {
            workers.insert(exec.name.clone(), exec.worker.clone());
        }
    });
    workers
}

/// The token variable a delivery binding declares for GitHub (`GH_TOKEN` by default).
pub(crate) fn token_variable(binding: &DeliveryBinding) -> String {
    binding
        .connections
        .get("github")
        .and_then(|names| names.first())
        .cloned()
        .unwrap_or_else(|| "GH_TOKEN".to_owned())
}

/// Default pause between two looks at a pull request's checks.
pub(crate) const DEFAULT_POLL: Duration = Duration::from_secs(20);
/// Default longest wait for checks and mergeability before delivery gives up.
pub(crate) const DEFAULT_WAIT_LIMIT: Duration = Duration::from_secs(60 * 60);
