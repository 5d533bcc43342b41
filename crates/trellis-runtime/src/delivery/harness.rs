//! The delivery harness: runs a run's delivery verifiers (never an agent) — `push` commits
//! and pushes the run branch, `pr`, `merge` and `comment` go on to the forge.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    Binding, BoxFuture, EventSink, ExecutionRequest, ExecutionResult, Harness, HarnessEvent,
    LogStream, TokenUsage,
};
use trellis_graph::{NodeName, WorkerErrorCode, WorkerOutcome, WorkerRef};

use super::git::{
    DeliveryFailure, Git, SourceRevision, crash, delivered_ref, delivery_env, prepare_candidate,
    push_run_branch, run_branch,
};
use super::kind::DeliveryKind;
use super::settings::ForgeSettings;
use super::target::{MergeInto, TargetMerge, leftover_markers, merge_target, needs_review_again};
use super::{comment, forge};

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
            return comment::post_comment(
                &self.forge,
                self.lineage_key(request),
                request,
                binding,
                log,
            )
            .await;
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
        let head = prepare_candidate(&git, request, &source, &branch, log).await?;
        // Only deliveries that can answer `conflict` bring the target in before pushing.
        let merge_first = matches!(
            kind,
            DeliveryKind::PullRequest { version: 2.. } | DeliveryKind::Merge { .. }
        );
        // A resolution that left markers goes back before the target is merged again.
        let unresolved = if merge_first {
            leftover_markers(&git, (&source.revision, &head), &remote, &source.branch).await?
        } else {
            Vec::new()
        };
        let target_merge = if !unresolved.is_empty() {
            TargetMerge::Unresolved { paths: unresolved }
        } else if merge_first {
            let into = MergeInto {
                candidate: &head,
                branch: &branch,
                delivered_ref: &delivered_ref(&branch),
                run_id: &request.run_id,
                execution: request.execution,
            };
            merge_target(&git, &remote, &source.branch, into, log).await?
        } else {
            TargetMerge::UpToDate
        };
        // A clean merge that changed nothing the reviewers judged is pushed as it is; one that
        // did stays in the work tree for the next round, and the reviewed candidate is pushed.
        let head = match &target_merge {
            TargetMerge::Merged { commit, .. } if !needs_review_again(&target_merge) => {
                commit.clone()
            }
            _ => head,
        };
        let pushed = push_run_branch(&git, &source, &head, (&branch, &remote), log).await?;
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
                let delivered = (&pushed, &target_merge);
                forge::deliver_pull(&self.forge, request, binding, kind, &git, delivered, log).await
            }
            DeliveryKind::Comment => Err(crash("comment delivery pushes nothing".into())),
        }
    }
}
