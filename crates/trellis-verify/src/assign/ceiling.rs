//! The ceiling of one finite check: how many assignments it may produce, and the marker a
//! check returns when its space exceeds that.

/// Most assignments (and dimension candidates) one finite check may produce.
pub(crate) const ASSIGNMENT_LIMIT: usize = 65_536;

/// The check's space exceeded the ceiling; callers treat the outcome as unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ceiling;
