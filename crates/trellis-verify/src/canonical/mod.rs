//! Canonical bytes and graph identity (§8.3): order-insensitive normalization of the compiled
//! IR written directly as compact JSON with byte-sorted keys, and its SHA-256.
//!
//! The bytes start with the bounds the analyzer computes and continue with parts taken from
//! the graph unchanged, so the verifier can write that tail while the analyzer runs.

mod writer;

use std::fmt;

use serde::{Serialize, Serializer};
use sha2::{Digest, Sha256};
use trellis_graph::{CompiledGraphIr, GraphSpec, StructuralBounds};

use writer::{Tail, Writer};

/// Why canonical bytes could not be produced. The typed IR holds integers only, so this is
/// reserved for future wire types that could carry other numbers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    #[error("the compiled IR contains a non-integer number")]
    NonIntegerNumber,
}

/// A graph's identity: the lowercase hex SHA-256 of its canonical bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GraphIdentity(String);

impl GraphIdentity {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GraphIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for GraphIdentity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// The canonical bytes of a compiled IR.
pub fn canonical_bytes(ir: &CompiledGraphIr) -> Result<Vec<u8>, CanonicalError> {
    let mut w = Writer::default();
    w.head(&ir.bounds);
    w.tail(&Tail {
        initial_input: &ir.initial_input,
        policy: &ir.policy,
        profile: ir.profile,
        root: &ir.root,
    });
    Ok(w.out)
}

/// SHA-256 of the canonical bytes, as 64 lowercase hex digits.
pub fn graph_identity(ir: &CompiledGraphIr) -> Result<GraphIdentity, CanonicalError> {
    let bytes = canonical_bytes(ir)?;
    Ok(GraphIdentity(hex::encode(Sha256::digest(&bytes))))
}

/// The canonical bytes after the bounds of the IR compiled from a graph: they depend on the
/// graph alone.
pub(crate) struct SpecTail(Vec<u8>);

/// Writes the canonical tail of the IR that `spec` compiles to.
pub(crate) fn spec_tail(spec: &GraphSpec) -> SpecTail {
    let mut w = Writer::default();
    w.tail(&Tail {
        initial_input: &spec.initial_input,
        policy: &spec.policy,
        profile: spec.profile,
        root: &spec.root,
    });
    SpecTail(w.out)
}

/// [`graph_identity`] of the IR with these bounds whose graph wrote `tail`.
pub(crate) fn identity_with_tail(bounds: &StructuralBounds, tail: &SpecTail) -> GraphIdentity {
    let mut w = Writer::default();
    w.head(bounds);
    let mut hasher = Sha256::new();
    hasher.update(&w.out);
    hasher.update(&tail.0);
    GraphIdentity(hex::encode(hasher.finalize()))
}
