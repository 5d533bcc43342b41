//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod arb;
pub mod build;
pub mod mixed;
pub mod reference_canonical;
