//! Profiles: saved run definitions (a graph or a template with its task default, a runtime
//! plan, a default input, a description) kept by name and revision in the state directory, and
//! turned back into an admission request when a run names one. Imports `shared` (documents,
//! templates) and `graphspec` (the admission request a profile becomes); saving admits the
//! definition through the run API (`api/runtime/profiles.rs`), so no profile that cannot run
//! is ever written.

pub(crate) mod document;
pub(crate) mod name;
pub(crate) mod requests;
pub(crate) mod store;
