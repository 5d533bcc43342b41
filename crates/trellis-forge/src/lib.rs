//! The GitHub forge client of Trellis: find-or-create the pull request of a head branch,
//! update it, collect review and check feedback as a diagnostic, merge when green, post one
//! report comment per run, and resolve `--task-from` issue and pull-request URLs into template
//! input.
//!
//! The client speaks GitHub's REST API with `reqwest` (rustls) and typed serde models; the API
//! base is configurable (tests, GitHub Enterprise Server). The token is read from a declared
//! environment variable name and never appears in a `Debug` output or an error.
//!
//! ```no_run
//! # async fn demo() -> Result<(), trellis_forge::ForgeError> {
//! use trellis_forge::{GITHUB_API_URL, GitHub, PullRequestDraft, RepoRef, Token};
//!
//! let github = GitHub::new(GITHUB_API_URL, Token::from_env("GH_TOKEN")?)?;
//! let repo = RepoRef::parse("acme/app")?;
//! let draft = PullRequestDraft {
//!     head: "trellis/0190a1b2c3d4".into(),
//!     base: "main".into(),
//!     title: "Add --json".into(),
//!     body: "…".into(),
//!     draft: false,
//! };
//! let opened = github.find_or_create_pull(&repo, &draft).await?;
//! println!("{}", opened.pull.html_url);
//! # Ok(()) }
//! ```

mod body;
mod client;
mod closing;
mod comments;
mod conversation;
mod error;
mod feedback;
mod item;
mod logs;
mod merge;
pub mod models;
mod policy;
mod pulls;
mod queue;
mod repo;
mod task;
mod task_url;
mod token;

pub use body::{BODY_BEGIN, BODY_END, with_owned_section};
pub use client::{GITHUB_API_URL, GitHub};
pub use comments::{CommentAction, CommentOutcome, ReportMarker, body_hash, is_report_comment};
pub use error::ForgeError;
pub use feedback::Feedback;
pub use item::FeedbackItem;
pub use logs::{LOG_EXCERPT_BYTES, LOG_EXCERPT_LINES, LogExcerpt, excerpt_log, strip_ansi};
pub use merge::{MergeBlocker, MergeOutcome, MergeRequest};
pub use policy::{MergeMethod, MergePolicy, MergeQueueRule, ProtectionAccess};
pub use pulls::{PullAction, PullOutcome, PullRequestDraft, PullUpdate};
pub use queue::QueueEntry;
pub use repo::RepoRef;
pub use task::{HeadScope, LinkedIssue, MAX_LINKED_ISSUES, ReviewScope, TaskContext};
pub use task_url::{TaskKind, TaskUrl};
pub use token::{Token, is_variable_name};
