//! Shared nouns and errors every room uses: the run API's errors, admission's and profiles'
//! errors, the state directory and its leases, strict document reading, the log budget, the
//! template catalogue, a run's environment file and a GraphSpec run's stored submission. Imports only `plan` and
//! delivery's source revision.

pub(crate) mod admission_error;
pub(crate) mod documents;
pub(crate) mod environment;
pub(crate) mod error;
pub(crate) mod home;
pub(crate) mod log_budget;
pub(crate) mod profile_error;
pub(crate) mod submission;
pub(crate) mod templates;
