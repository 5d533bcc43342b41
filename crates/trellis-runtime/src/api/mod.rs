//! The run API façade: [`runtime::Runtime`] and its options, `validate` and `doctor`. The top
//! room: it may import every other room, and no other room imports it.

pub(crate) mod doctor;
pub(crate) mod options;
pub(crate) mod runtime;
pub(crate) mod validation;
