//! Trellis's built-in worker registry: contract-polymorphic agent workers and fixed-contract
//! delivery workers, with the admission rules the reference product applies to them.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Value, json};
use trellis_graph::json::JsonPath;
use trellis_graph::worker::{
    ArtifactProfile, Autonomy, CapabilityPolicy, VerifierContract, WorkerBinding, WorkerContract,
};
use trellis_graph::{
    DiagnosticCode, EnumSet, FieldName, GraphDiagnostic, GraphNode, GraphProfile, GraphSpec,
    PayloadType, RedactionClass, RegistryError, StableRef, StepNode, WorkerDescriptor,
    WorkerErrorCode, WorkerRef, WorkerRegistry,
};

use crate::Verification;
use crate::diag::Diags;
use crate::index::Index;

/// How the runtime executes a built-in worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinKind {
    /// An AI agent run through a harness; takes the contract the graph declares.
    Agent,
    /// A deterministic delivery worker (git push/PR/merge, comment posting) with a fixed
    /// contract.
    Delivery,
    /// A Trellis command worker (`command.<name>@N`): contract-polymorphic like an agent, run by
    /// whatever command the runtime plan binds, and needing no instructions.
    Command,
}

/// The name prefix of command worker references (`command.tests@1`).
pub const COMMAND_WORKER_PREFIX: &str = "command.";

/// One built-in worker reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinWorker {
    pub worker: &'static str,
    pub kind: BuiltinKind,
}

const fn agent(worker: &'static str) -> BuiltinWorker {
    BuiltinWorker {
        worker,
        kind: BuiltinKind::Agent,
    }
}

const fn delivery(worker: &'static str) -> BuiltinWorker {
    BuiltinWorker {
        worker,
        kind: BuiltinKind::Delivery,
    }
}

/// Every built-in worker reference (the reference product's vocabulary).
pub const BUILTIN_WORKERS: &[BuiltinWorker] = &[
    agent("builtin.agent.worker@1"),
    agent("builtin.agent.software-worker@1"),
    agent("builtin.agent.acceptance-verifier@1"),
    agent("builtin.agent.code-verifier@1"),
    agent("builtin.agent.review-repair@1"),
    agent("builtin.agent.delivery-repair@1"),
    agent("builtin.agent.researcher@1"),
    agent("builtin.agent.research-bootstrap@1"),
    agent("builtin.agent.research-explorer@1"),
    agent("builtin.agent.research-synthesizer@1"),
    agent("builtin.agent.research-challenger@1"),
    agent("builtin.agent.research-reviewer@1"),
    // The auto-research protocol's roles (templates/auto-research*.json).
    agent("builtin.agent.research-topology@1"),
    agent("builtin.agent.research-planner@1"),
    agent("builtin.agent.research-scout@1"),
    agent("builtin.agent.research-stager@1"),
    agent("builtin.agent.research-experimenter@1"),
    agent("builtin.agent.research-judge@1"),
    agent("builtin.agent.research-recorder@1"),
    agent("builtin.agent.research-finalizer@1"),
    agent("builtin.agent.research-auditor@1"),
    agent("builtin.agent.research-repair@1"),
    agent("builtin.agent.research-archivist@1"),
    agent("builtin.agent.research-manifest@1"),
    agent("builtin.agent.reviewer@1"),
    agent("builtin.agent.pr-classifier@1"),
    agent("builtin.agent.pr-code-checker@1"),
    agent("builtin.agent.pr-reproducer@1"),
    delivery("builtin.git-delivery.push@1"),
    delivery("builtin.git-delivery.pr@1"),
    delivery("builtin.git-delivery.pr@2"),
    delivery("builtin.git-delivery.merge@1"),
    delivery("builtin.git-delivery.merge@2"),
    delivery("builtin.git-delivery.merge@3"),
    delivery("builtin.comment-delivery.post@1"),
];

/// The kind of a built-in worker reference, or `None` for any other reference.
pub fn builtin_kind(worker: &WorkerRef) -> Option<BuiltinKind> {
    if worker.name().starts_with(COMMAND_WORKER_PREFIX) {
        return Some(BuiltinKind::Command);
    }
    BUILTIN_WORKERS
        .iter()
        .find(|b| b.worker == worker.as_str())
        .map(|b| b.kind)
}

/// A fixed delivery contract: the output, signals and diagnostic a delivery node must declare,
/// and for a comment delivery its input (a git delivery's input is the graph's to choose).
#[derive(Debug, Clone, PartialEq, Eq)]
struct DeliveryContract {
    input: Option<PayloadType>,
    output: PayloadType,
    signals: BTreeMap<FieldName, EnumSet>,
    diagnostic: PayloadType,
}

fn parse_type(value: &Value) -> PayloadType {
    // The literals below are well-formed; `Null` would only make every contract mismatch.
    PayloadType::parse(value, &JsonPath::root()).unwrap_or(PayloadType::Null)
}

fn required_string() -> Value {
    json!({"type": {"kind": "string"}, "required": true})
}

fn delivery_signals(labels: &[&str]) -> BTreeMap<FieldName, EnumSet> {
    let set = EnumSet::parse(&json!(labels), &JsonPath::root()).ok();
    set.map(|s| BTreeMap::from([(FieldName::from_static("delivery"), s)]))
        .unwrap_or_default()
}

fn message_diagnostic() -> PayloadType {
    parse_type(&json!({"kind": "record", "fields": {"message": required_string()}}))
}

/// A git delivery receipt contract; `extra` are the worker-specific required string fields.
fn git_contract(version: &str, mode: &str, labels: &[&str], extra: &[&str]) -> DeliveryContract {
    let enum_field =
        |values: &[&str]| json!({"type": {"kind": "enum", "values": values}, "required": true});
    let mut fields = serde_json::Map::new();
    for name in ["headRevision", "repository", "targetBranch"]
        .iter()
        .chain(extra)
    {
        fields.insert((*name).to_owned(), required_string());
    }
    fields.insert("mode".to_owned(), enum_field(&[mode]));
    fields.insert("outcome".to_owned(), enum_field(labels));
    fields.insert("version".to_owned(), enum_field(&[version]));
    DeliveryContract {
        input: None,
        output: parse_type(&json!({"kind": "record", "fields": fields})),
        signals: delivery_signals(labels),
        diagnostic: message_diagnostic(),
    }
}

/// A git delivery worker accepts its base labels, or the base labels plus `repair_required`
/// (when visible feedback is routed to a repair agent).
fn git_variants(version: &str, mode: &str, base: &[&str], extra: &[&str]) -> Vec<DeliveryContract> {
    let mut with_repair: Vec<&str> = base.to_vec();
    with_repair.push("repair_required");
    vec![
        git_contract(version, mode, base, extra),
        git_contract(version, mode, &with_repair, extra),
    ]
}

fn comment_contract() -> DeliveryContract {
    let optional_string = json!({"type": {"kind": "string"}, "required": false});
    let mut receipt = serde_json::Map::new();
    for name in [
        "bodyHash",
        "commentId",
        "destinationUrl",
        "discussionId",
        "discussionKind",
        "mode",
        "outcome",
        "repository",
        "url",
        "version",
    ] {
        receipt.insert(name.to_owned(), required_string());
    }
    receipt.insert("sourceRevision".to_owned(), optional_string.clone());
    let scope: serde_json::Map<String, Value> = [
        "baseBranch",
        "baseRepository",
        "baseRevision",
        "headBranch",
        "headRepository",
        "headRevision",
    ]
    .iter()
    .map(|name| ((*name).to_owned(), optional_string.clone()))
    .collect();
    DeliveryContract {
        input: Some(parse_type(&json!({"kind": "record", "fields": {
            "body": required_string(),
            "reviewScope": {"type": {"kind": "record", "fields": scope}, "required": false},
            "url": required_string()}}))),
        output: parse_type(&json!({"kind": "record", "fields": {
            "receipt": {"type": {"kind": "record", "fields": receipt}, "required": true}}})),
        signals: delivery_signals(&["posted"]),
        diagnostic: message_diagnostic(),
    }
}

/// The accepted contracts of each delivery worker.
fn delivery_contracts(worker: &str) -> &'static [DeliveryContract] {
    static TABLE: OnceLock<BTreeMap<&'static str, Vec<DeliveryContract>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let merge = ["ci_failed", "conflict", "merged"];
        BTreeMap::from([
            (
                "builtin.git-delivery.push@1",
                git_variants("v1", "push", &["pushed"], &["headBranch"]),
            ),
            (
                "builtin.git-delivery.pr@1",
                git_variants("v1", "pr", &["opened"], &["pullRequestId"]),
            ),
            (
                "builtin.git-delivery.pr@2",
                git_variants(
                    "v2",
                    "pr",
                    &["ci_failed", "conflict", "ready"],
                    &["pullRequestId"],
                ),
            ),
            (
                "builtin.git-delivery.merge@1",
                git_variants("v1", "merge", &merge, &["pullRequestId"]),
            ),
            (
                "builtin.git-delivery.merge@2",
                git_variants("v2", "merge", &merge, &["pullRequestId", "mergeRevision"]),
            ),
            (
                "builtin.git-delivery.merge@3",
                git_variants("v3", "merge", &merge, &["pullRequestId", "mergeRevision"]),
            ),
            ("builtin.comment-delivery.post@1", vec![comment_contract()]),
        ])
    });
    table.get(worker).map(Vec::as_slice).unwrap_or(&[])
}

/// What a node declares about its worker; reused references must declare the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Declaration<'g> {
    pub(crate) is_verifier: bool,
    input: &'g PayloadType,
    output: &'g PayloadType,
    signals: Option<&'g BTreeMap<FieldName, EnumSet>>,
    diagnostic: Option<&'g PayloadType>,
}

impl Declaration<'_> {
    /// Whether this declaration is one of `worker`'s fixed delivery contracts.
    pub(crate) fn is_delivery_contract_of(&self, worker: &WorkerRef) -> bool {
        delivery_contracts(worker.as_str()).iter().any(|c| {
            Some(&c.signals) == self.signals
                && c.input.as_ref().is_none_or(|input| input == self.input)
                && c.output == *self.output
                && Some(&c.diagnostic) == self.diagnostic
        })
    }
}

pub(crate) fn declaration(node: &GraphNode) -> Option<Declaration<'_>> {
    let exec: &StepNode = node.executable()?;
    let (signals, diagnostic) = match node {
        GraphNode::Verifier(v) => (Some(&v.signals), Some(&v.diagnostic)),
        _ => (None, None),
    };
    Some(Declaration {
        is_verifier: signals.is_some(),
        input: &exec.input,
        output: &exec.output,
        signals,
        diagnostic,
    })
}

/// The built-in registry synthesized for one graph: each built-in reference resolves to a
/// descriptor carrying the contract the graph declares for it.
#[derive(Debug, Clone, Default)]
pub struct BuiltinRegistry {
    pub(crate) descriptors: BTreeMap<WorkerRef, WorkerDescriptor>,
    /// Synthesized for a plan-bound run (see `BuiltinRegistry::declared`).
    pub(crate) declared: bool,
}

impl BuiltinRegistry {
    /// Applies the built-in admission rules and synthesizes the descriptors; the error lists
    /// every violation as an `invalid_graph_shape` diagnostic.
    pub fn for_graph(spec: &GraphSpec) -> Result<Self, Vec<GraphDiagnostic>> {
        let mut scratch = Diags::default();
        let index = Index::build(&spec.root, &mut scratch);
        let mut diags = Diags::default();
        let mut uses: BTreeMap<&WorkerRef, Vec<u32>> = BTreeMap::new();
        let mut registry = BuiltinRegistry::default();
        for id in 0..index.len() as u32 {
            let node = index.node(id);
            let (Some(exec), Some(decl)) = (node.executable(), declaration(node)) else {
                continue;
            };
            let Some(kind) = builtin_kind(&exec.worker) else {
                continue;
            };
            let shape = |diags: &mut Diags, message: String| {
                diags.emit(
                    DiagnosticCode::InvalidGraphShape,
                    message,
                    index.path(id),
                    [&exec.name],
                );
            };
            match kind {
                BuiltinKind::Agent if exec.instructions.is_none() => shape(
                    &mut diags,
                    format!(
                        "agent-backed node {} requires authored instructions",
                        exec.name
                    ),
                ),
                BuiltinKind::Agent | BuiltinKind::Command => {}
                BuiltinKind::Delivery => {
                    if exec.instructions.is_some() {
                        shape(
                            &mut diags,
                            format!("delivery node {} rejects authored instructions", exec.name),
                        );
                    }
                    if !decl.is_verifier {
                        shape(
                            &mut diags,
                            format!("delivery node {} must be a verifier", exec.name),
                        );
                    } else if !decl.is_delivery_contract_of(&exec.worker) {
                        shape(
                            &mut diags,
                            format!(
                                "delivery node {} declares an invalid contract for worker {}",
                                exec.name, exec.worker
                            ),
                        );
                    }
                }
            }
            let users = uses.entry(&exec.worker).or_default();
            users.push(id);
            if users.len() == 1 {
                registry
                    .descriptors
                    .insert(exec.worker.clone(), descriptor(spec, &exec.worker, &decl));
            }
        }
        for (worker, users) in &uses {
            let first = declaration(index.node(users[0]));
            if users.iter().all(|u| declaration(index.node(*u)) == first) {
                continue;
            }
            let names: Vec<&str> = users.iter().map(|u| index.name(*u).as_str()).collect();
            diags.emit(
                DiagnosticCode::InvalidGraphShape,
                format!(
                    "worker {worker} is reused with inconsistent executable declarations ({})",
                    names.join(", ")
                ),
                index.path(users[0]),
                users.iter().map(|u| index.name(*u)),
            );
        }
        if diags.is_empty() {
            Ok(registry)
        } else {
            Err(diags.into_sorted())
        }
    }
}

pub(crate) fn descriptor(
    spec: &GraphSpec,
    worker: &WorkerRef,
    decl: &Declaration,
) -> WorkerDescriptor {
    let verifier = match (decl.signals, decl.diagnostic) {
        (Some(signals), Some(diagnostic)) => Some(VerifierContract {
            signals: signals.clone(),
            diagnostic: diagnostic.clone(),
        }),
        _ => None,
    };
    let result_type = StableRef::new("openengine.result@1").ok();
    WorkerDescriptor {
        worker: worker.clone(),
        graph_profiles: vec![GraphProfile::Full],
        binding: WorkerBinding {
            protocol: "builtin".to_owned(),
            version: "1".to_owned(),
            profile: "openengine.worker.builtin/v1".to_owned(),
        },
        contract: WorkerContract {
            input: decl.input.clone(),
            output: decl.output.clone(),
            verifier,
            errors: WorkerErrorCode::ALL.to_vec(),
        },
        capability_policy: CapabilityPolicy {
            autonomy: Autonomy::Strict,
            permission_policy: spec.policy.policy.clone(),
        },
        artifact_profile: ArtifactProfile {
            allowed_type_ids: result_type.into_iter().collect(),
            allowed_media_types: vec!["application/json".to_owned()],
            minimum_redaction: RedactionClass::Internal,
        },
        credential_requirements: Vec::new(),
    }
}

impl WorkerRegistry for BuiltinRegistry {
    fn resolve(&self, worker: &WorkerRef) -> Result<WorkerDescriptor, RegistryError> {
        self.descriptors
            .get(worker)
            .cloned()
            .ok_or_else(|| RegistryError::NotFound(worker.clone()))
    }

    fn validates_descriptors(&self) -> bool {
        !self.declared
    }
}

/// Verifies a graph against the built-in registry; admission-rule violations are reported
/// together with the analyzer's diagnostics.
pub fn verify_builtin(spec: &GraphSpec) -> Verification {
    match BuiltinRegistry::for_graph(spec) {
        Ok(registry) => crate::admission::verify_with(spec, &registry, Vec::new()),
        Err(admission) => {
            crate::admission::verify_with(spec, &BuiltinRegistry::default(), admission)
        }
    }
}
