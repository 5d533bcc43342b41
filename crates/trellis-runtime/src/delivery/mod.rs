//! Delivery verifiers, executed by the runtime (never by an agent): `push` commits and pushes
//! the run branch, `pr` opens or updates its pull request and reports review feedback and
//! checks, `merge` merges it when green, `comment` posts or edits one report comment. Imports
//! no other room of this crate.

mod calls;
mod comment;
mod feedback_log;
mod forge;
mod git;
mod harness;
mod kind;
mod retry;
mod settings;
mod target;
mod watch;

pub(crate) use git::git_blocking;
#[cfg(feature = "testing")]
pub use git::run_branch;
pub use git::{SourceRevision, drop_pending_merges_from, read_source, without_userinfo};
pub use harness::GitDelivery;
pub(crate) use kind::{DeliveryKind, delivery_workers, token_variable};
#[cfg(feature = "testing")]
pub use retry::RetrySchedule;
pub use settings::{ForgeSettings, parse_remote};
