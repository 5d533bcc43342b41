//! RuntimePlan admission, the run supervisor and detached controller, workspace locks,
//! force-stop, recovery, resume, built-in templates and git delivery.

pub mod delivery;
pub mod home;
pub mod plan;
pub mod templates;
