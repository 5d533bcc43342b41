//! The production verifier: diagnostics, control and dataflow analysis, structural bounds, compiled IR, canonical bytes and SHA-256 graph identity.
