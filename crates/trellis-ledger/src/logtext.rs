//! Log message hygiene: the run vocabulary's one bounding policy.

pub use trellis_run_model::sanitize_log_message;
