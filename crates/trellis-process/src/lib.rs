//! The one child-process runner every part of Trellis starts programs through: agent CLIs,
//! command workers, GaP tools, the Python bridge and git.
//!
//! A child runs as the leader of its own process group, started with `posix_spawn` (no
//! `pre_exec` closure, so the parent's memory is never copied), with exactly the declared
//! environment. Its stdin gets the payload and is closed; its stdout and stderr are masked of
//! secret values on the raw byte stream, cut into bounded lines and streamed to an observer
//! that may slow the child down but never silently loses a line. A deadline (judged here by the
//! child's own completion; the graph supervisor also judges `timeoutMs` by its own clock), an idle limit and cancellation stop the whole group (SIGTERM,
//! grace, SIGKILL, grandchildren included), and every end is classified: exited with a code,
//! crashed, killed from outside, or stopped by us.
//!
//! A [`Sandbox`] rewrites a spec to run inside bubblewrap (`--isolation sandbox`).
//!
//! [`run_process`] is the async API; [`run_blocking`] serves synchronous callers; a
//! [`Session`] is a long-lived child speaking a protocol over its pipes.
#![forbid(unsafe_code)]

mod blocking;
mod end;
mod guard;
mod lines;
mod redact;
mod run;
mod sandbox;
mod session;
mod shapes;
mod spec;

pub use blocking::{CANCEL_POLL, run_blocking};
pub use end::{ProcessEnd, kill_group, signal_group};
pub use guard::{GUARD_SUBCOMMAND, GUARD_TOKEN_VARIABLE, die_with_this_process, run_guard};
pub use lines::{LINE_CUT_MARKER, LineDecoder, LineReader, LineSplitter, RawLine, Stream};
pub use nix::sys::signal::Signal;
pub use redact::{MIN_SECRET_BYTES, REDACTED, Redactor, StreamRedactor};
pub use run::{BoxFuture, ProcessObserver, ProcessReport, run_process};
pub use sandbox::{BWRAP_PROGRAM, Placement, Sandbox, SandboxError};
pub use session::{RawSessionPipes, Session, SessionPipes};
pub use spec::{
    DEFAULT_KILL_GRACE, DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_STDOUT_BYTES, DRAIN_AFTER_EXIT,
    ProcessLimits, ProcessSpec,
};
pub use tokio_util::sync::CancellationToken;
