//! GaP `workflow.json` text, as `trellis run DIR` loads it: loading and validation never
//! panic, and every issue renders.
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use trellis_gap::{ValidateOptions, load_workflow_str, validate};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(workflow) = load_workflow_str(text, PathBuf::from(".")) else {
        return;
    };
    for issue in validate(&workflow, &ValidateOptions::default()) {
        let _ = issue.to_string();
    }
});
