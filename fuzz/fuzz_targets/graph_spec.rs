//! GraphSpec text, as `trellis validate` and `trellis run` read it: parsing never panics, a
//! parsed graph serializes to a document that parses back to the same graph, and the verifier
//! judges every parsed graph without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trellis_graph::GraphSpec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(spec) = GraphSpec::from_json_str(text) else {
        return;
    };
    let written = serde_json::to_string(&spec).unwrap_or_default();
    let reread = GraphSpec::from_json_str(&written);
    assert_eq!(reread.as_ref().ok(), Some(&spec), "{written}");
    let _ = trellis_verify::verify_builtin(&spec).envelope();
});
