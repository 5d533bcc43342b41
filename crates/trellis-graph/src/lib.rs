//! GraphSpec openengine.graph.full/v1 wire types: closed parsing with exact limits, the
//! PayloadType algebra, subtyping, value checking, worker descriptors and the registry port.
//!
//! Every wire type is read from a JSON tree (`trellis-json`'s, parsed from text or built from a
//! `serde_json::Value`) with a JSON location on failure, refusing unknown fields, and
//! serializes back to the contract's shape (sorted enum sets and record fields, `null` for an
//! absent `otherwise`/`field`/`verifier`, omitted `instructions`/`until`/`timeoutMs`).

pub mod artifact;
pub mod conformance;
pub mod fields;
pub mod ident;
pub mod json;
pub mod limits;
pub mod node;
pub mod payload;
pub mod registry;
pub mod schema;
pub mod selector;
pub mod spec;
pub mod worker;

pub use artifact::{ArtifactRef, RedactionClass};
pub use fields::Fields;
pub use ident::{
    EnumLabel, EnumSet, FailReason, FieldName, FieldPath, NodeInstructions, NodeName, PolicyRef,
    PositiveInteger, StableRef, WorkerRef,
};
pub use json::{JsonPath, ParseError};
pub use node::{
    ChoiceBranch, ChoiceNode, FailNode, GraphNode, LoopNode, MapNode, ParNode, SeqNode, StepNode,
    SucceedNode, VerifierNode,
};
pub use payload::{PayloadType, RecordField, ValueMismatch};
pub use registry::{RegistryError, StaticRegistry, WorkerRegistry};
pub use selector::{
    ControlSelector, ControlSource, DataSelector, Guard, InputBinding, Join, NodeOutputSelector,
    OutputChannel, WriteBinding,
};
pub use spec::{
    CompiledGraphIr, DiagnosticCode, GraphDiagnostic, GraphProfile, GraphSpec, PathSegment,
    PolicyBinding, Severity, StructuralBounds, TerminationWitness,
};
pub use worker::{
    FailureReason, VerifierContract, WorkerContract, WorkerDescriptor, WorkerErrorCode,
    WorkerOutcome,
};
