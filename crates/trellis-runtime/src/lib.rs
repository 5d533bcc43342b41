//! RuntimePlan admission, the run supervisor and detached controller, workspace locks,
//! force-stop, recovery, resume, built-in templates and git delivery.

pub mod delivery;
pub mod error;
pub mod gap_runner;
pub mod home;
pub mod plan;
pub mod recovery;
pub mod templates;

pub use error::RuntimeError;
pub mod controller;
pub mod launch;
pub mod log_budget;
pub mod reuse;
pub mod submission;
pub mod supervisor;
