//! Harness adapters (claude, codex, copilot, pi, exec) behind one trait: prompt rendering,
//! reply-schema generation, correction turns, failure mapping and token usage.
//!
//! A harness turns one [`ExecutionRequest`] into one settled [`ExecutionResult`], streaming
//! redacted log lines and token usage as [`HarnessEvent`]s. Every reply is checked mechanically
//! against the node's declared contract before it may reach the graph.
//!
//! The runtime picks the harness of a plan's agent lane with [`agent_harness`] (or
//! [`AgentHarness::new`]); command bindings use [`ExecHarness`]. Under `--isolation sandbox`
//! both run every step in a [`Sandbox`] placed by `containment`.

pub mod access;
pub mod agent;
pub mod binding;
mod claude;
mod codex;
pub mod containment;
pub mod contract;
mod copilot;
mod copilot_headless;
mod copilot_provider;
mod copilot_registry;
pub mod exec;
pub mod failure;
pub mod forward;
pub mod harness;
pub mod harness_sandbox;
mod jsonrpc;
pub mod lane;
mod pi;
pub mod policy;
pub mod preflight;
pub mod prompt;
mod protocol;
pub mod redact;
pub mod reply;
mod runner;
pub mod schema;
pub mod session;
mod turns;

pub use agent::{AgentHarness, AgentOptions, agent_harness};
pub use binding::{
    AgentBinding, Binding, CommandBinding, DeliveryBinding, Effort, NodeLane, SessionScope,
};
pub use containment::{Isolation, Network};
pub use contract::NodeContract;
pub use exec::ExecHarness;
pub use failure::{ProviderFailureKind, sign_in_advice};
pub use harness::{
    BoxFuture, EventSink, ExecutionRequest, ExecutionResult, Harness, HarnessEvent, LogLevel,
    LogStream, TokenUsage,
};
pub use lane::{
    AgentLane, HarnessKind, LaneChoiceError, Provider, UnsupportedLane, detect_installed_cli,
};
pub use redact::{Redactor, SecretEnv};
pub use schema::SchemaDialect;
pub use trellis_process::{Sandbox, SandboxError};
pub use turns::MAX_CORRECTIONS;
