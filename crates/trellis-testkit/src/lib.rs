//! Test support for Trellis: a scripted model server that speaks the Anthropic Messages and
//! OpenAI Responses streaming protocols on loopback, helpers that run the real `claude` and
//! `codex` CLIs against it with no internet, and a fake GitHub REST API ([`github`]).
//!
//! A test writes a [`Script`] (which conversations exist, what each turn answers), starts a
//! [`ModelServer`] with it, points a CLI at [`ModelServer::url`] (Claude Code) or
//! [`ModelServer::openai_base_url`] (Codex), runs the CLI, and then asserts on the CLI's output
//! and on [`ModelServer::requests`] — what the CLI actually sent. See `docs/agent-clis.md` for the
//! script format and the exact CLI invocations.
//!
//! [`reference`] runs the reference product's binary as an oracle for differential tests,
//! [`graphgen`] generates the graphs they (and the fuzz tests) run on, and [`fake_agent`] is
//! the deterministic agent (binary `trellis-fake-claude`) the runtime differential runs both
//! tools with.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use serde_json::json;
//! use trellis_testkit::{Block, Conversation, ModelServer, Script, Turn, Usage};
//!
//! let script = Script::new(vec![
//!     Conversation::new("writer")
//!         .matching("node: writer")
//!         .turn(Turn::reply(vec![Block::write_file("hello.txt", "hi\n")]).with_usage(Usage::new(120, 30)))
//!         .turn(Turn::reply(vec![Block::structured(json!({"response": {"done": true}}))])),
//! ]);
//! let server = ModelServer::start(script).await?;
//! // ... run `claude` with ANTHROPIC_BASE_URL=server.url() ...
//! assert!(server.script_finished());
//! # Ok(()) }
//! ```

mod anthropic;
pub mod cli;
pub mod fake_agent;
pub mod fault_proxy;
pub mod git;
pub mod github;
/// Where the public conformance vectors are, for test suites that cannot depend on the graph
/// crate themselves (the CLI's).
pub use trellis_graph::conformance;
pub mod graphgen;
mod matching;
mod openai;
mod process;
mod record;
pub mod reference;
mod request;
mod resolve;
mod script;
mod server;
mod sse;

pub use record::{Outcome, RecordedRequest};
pub use request::STRUCTURED_OUTPUT_TOOL;
pub use resolve::WORKDIR_PLACEHOLDER;
pub use script::{Api, Block, Conversation, Hang, HttpError, Script, ScriptError, Turn, Usage};
pub use server::{MAX_BODY_BYTES, ModelServer, ServerOptions};
