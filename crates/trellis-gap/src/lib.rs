//! GaP workflow.json v3: loader, structural validator, super-step executor, Python bridge and trace writer.
//!
//! Typical use: [`load_workflow`] → [`validate`] → [`execute`] (or [`execute_with_defaults`]).

mod bridge;
mod checkpoint;
mod connector;
mod containment;
mod context;
mod events;
mod executor;
mod introspect;
mod issue;
mod journal;
mod loader;
mod model;
mod observation;
mod pyfmt;
mod refs;
mod report;
mod sample;
mod schema;
mod skills;
mod stream;
mod timeouts;
mod tools;
mod trace;
mod trace_diff;
mod validate;

pub use bridge::{BRIDGE_SOURCE, BridgeError, MAX_BRIDGE_FRAME_BYTES, PythonConfig};
pub use checkpoint::{CheckpointMode, CheckpointResult};
pub use connector::{CONNECTOR_CALL_TIMEOUT, CommandConnector, Connector, PythonConnector};
pub use containment::GapContainment;
pub use context::{GuardLimits, NodeContext};
pub use events::{
    CollectingObserver, ExecutionResult, ExitStatus, NullObserver, RunEvent, RunObserver,
};
pub use executor::{DEFAULT_SCRIPT_TIMEOUT, ExecuteOptions, execute};
pub use introspect::PythonIntrospector;
pub use issue::{Issue, Severity, graph_validation_message, render_issues};
pub use journal::{NodeJournal, SettledBody};
pub use loader::{
    LoadError, is_gap_document, load_workflow, load_workflow_str, parse_workflow, read_inputs_file,
    workflow_file_path,
};
pub use model::{
    ConditionalEdge, END, EndStatus, ExitDecl, IN, InputValue, NodeDef, NodeType,
    OBSERVATION_STREAM, Ref, START, SubgraphDef, ToolCall, Workflow,
};
pub use observation::{
    DEFAULT_OBSERVATION_HZ, ObservationStream, STREAM_MARKER_KEY, StreamUnavailable,
    observation_hz, stream_marker,
};
pub use pyfmt::{py_repr, py_str};
pub use refs::{LocalOutputs, ResolveError, ScopeValue, resolve_input, resolve_ref};
pub use report::{ValidationReport, is_gap_path};
pub use sample::Sample;
pub use skills::{
    BundleKind, CanonicalScript, SkillBundle, SkillError, SkillRegistry, parse_skill_md,
};
pub use stream::{CancelToken, StreamSlot, StreamTimeout};
pub use timeouts::{META_SCRIPT_TIMEOUT, META_SCRIPT_TIMEOUTS};
pub use tools::{Tool, ToolDescriptor, ToolError, ToolRegistry, load_command_manifest};
pub use trace_diff::{
    Divergence, NodeAgreement, TraceDiff, TraceDiffError, diff_traces, first_difference,
};
pub use validate::{
    MAX_SUBGRAPH_NESTING, RunSignature, ScriptIntrospector, ScriptReport, ValidateOptions, validate,
};

/// Runs `workflow` with default options and the given tool registry, ignoring progress events.
pub fn execute_with_defaults(workflow: &Workflow, tool_registry: ToolRegistry) -> ExecutionResult {
    let options = ExecuteOptions {
        tool_registry: std::sync::Arc::new(tool_registry),
        ..ExecuteOptions::default()
    };
    execute(workflow, options, &NullObserver)
}
