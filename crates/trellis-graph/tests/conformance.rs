//! The public GraphSpec vectors that need only parsing: graph/positive round-trips,
//! graph/negative pinned phrases, and the worker descriptor and outcome vectors.

use std::path::{Path, PathBuf};

use serde_json::Value;
use trellis_graph::conformance::{json_files, require};
use trellis_graph::json::{JsonPath, parse_strict};
use trellis_graph::{
    ArtifactRef, CompiledGraphIr, GraphDiagnostic, GraphSpec, WorkerDescriptor, WorkerOutcome,
};

fn vectors() -> Option<PathBuf> {
    require(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|d| d.join("openengine-v1"))
}

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Parses `text` as the named wire type through the text entry point (the scanner-built tree).
fn from_text(schema: &str, text: &str) -> Option<Result<Value, String>> {
    let value = match schema {
        "graph" => GraphSpec::from_json_str(text).map(|v| serde_json::to_value(v).unwrap()),
        "compiled-ir" => {
            CompiledGraphIr::from_json_str(text).map(|v| serde_json::to_value(v).unwrap())
        }
        "artifact" => ArtifactRef::from_json_str(text).map(|v| serde_json::to_value(v).unwrap()),
        "descriptor" => {
            WorkerDescriptor::from_json_str(text).map(|v| serde_json::to_value(v).unwrap())
        }
        "outcome" => WorkerOutcome::from_json_str(text).map(|v| serde_json::to_value(v).unwrap()),
        _ => return None,
    };
    Some(value.map_err(|e| e.to_string()))
}

/// Parses `doc` as the named wire type and re-serializes it.
fn round_trip(schema: &str, doc: &Value) -> Result<Value, String> {
    let result = round_trip_value(schema, doc);
    // Parsing the document's text, compact and pretty, gives the same value or error.
    for text in [doc.to_string(), serde_json::to_string_pretty(doc).unwrap()] {
        if let Some(from_text) = from_text(schema, &text) {
            assert_eq!(from_text, result, "text and value parsing differ on {text}");
        }
    }
    result
}

fn round_trip_value(schema: &str, doc: &Value) -> Result<Value, String> {
    let at = JsonPath::root();
    let text = doc.to_string();
    // Every vector also goes through the strict text parser.
    parse_strict(&text).map_err(|e| e.to_string())?;
    match schema {
        "graph" => GraphSpec::parse(doc, &at).map(|v| serde_json::to_value(v).unwrap()),
        "compiled-ir" => CompiledGraphIr::parse(doc, &at).map(|v| serde_json::to_value(v).unwrap()),
        "artifact" => ArtifactRef::parse(doc, &at).map(|v| serde_json::to_value(v).unwrap()),
        "descriptor" => WorkerDescriptor::parse(doc, &at).map(|v| serde_json::to_value(v).unwrap()),
        "outcome" => WorkerOutcome::parse(doc, &at).map(|v| serde_json::to_value(v).unwrap()),
        "diagnostic" => {
            let parsed: GraphDiagnostic =
                serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
            return Ok(serde_json::to_value(parsed).unwrap());
        }
        other => panic!("unknown schema {other}"),
    }
    .map_err(|e| e.to_string())
}

#[test]
fn graph_positive_vectors_round_trip() {
    let Some(dir) = vectors() else { return };
    let files = json_files(&dir.join("graph/positive"));
    for file in &files {
        let name = file.file_stem().unwrap().to_str().unwrap();
        let schema = match name {
            "compiled-ir" => "compiled-ir",
            "diagnostic" => "diagnostic",
            "artifact-ref" => "artifact",
            _ => "graph",
        };
        let doc = read(file);
        let back = round_trip(schema, &doc).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(back, doc, "{name} does not round-trip");
    }
    println!(
        "graph/positive: {} of {} vectors round-trip",
        files.len(),
        files.len()
    );
    assert_eq!(files.len(), 5);
}

/// The substring table of the contract (first match wins).
fn code_for(message: &str) -> &'static str {
    let table: [(&[&str], &str); 14] = [
        (
            &[
                "payload type `union`",
                "payload type `reference`",
                "payload type `custom`",
            ],
            "UNSAFE_PAYLOAD_KIND",
        ),
        (
            &["unknown field `regex` in payload type `string`"],
            "UNSAFE_PAYLOAD_CONSTRAINT",
        ),
        (&["enum set must not be empty"], "EMPTY_ENUM"),
        (
            &["enum set must not contain duplicate values"],
            "DUPLICATE_ENUM",
        ),
        (
            &["stable reference ", "type ID is invalid"],
            "INVALID_STABLE_REF",
        ),
        (
            &[
                "unknown field `script`, expected `value` or `labels`",
                "unknown field `regex`, expected `value` or `labels`",
            ],
            "EXECUTABLE_GUARD",
        ),
        (
            &["expected internally tagged enum DataSelector"],
            "STRING_SELECTOR",
        ),
        (
            &[
                "unknown field `command`",
                "unknown field `endpoint`",
                "unknown field `credential`",
            ],
            "FORBIDDEN_WORKER_FIELD",
        ),
        (
            &["expected `openengine.graph.full/v1` or `openengine.graph.single-worker/v1`"],
            "UNKNOWN_PROFILE",
        ),
        (
            &[
                "expected one of `step`, `verifier`, `seq`, `choice`, `par`, `loop`, `map`, `succeed`, `fail`",
            ],
            "UNKNOWN_NODE",
        ),
        (
            &["unknown field `bytes`", "unknown field `signedUrl`"],
            "FORBIDDEN_ARTIFACT_FIELD",
        ),
        (
            &["value must be at most 256 non-control characters"],
            "INVALID_ARTIFACT_VALUE",
        ),
        (
            &[
                "integer must be at least",
                "integer is outside the JavaScript-safe range",
            ],
            "INVALID_BOUND",
        ),
        (&["exceeds the maximum length of 128"], "INVALID_IDENTIFIER"),
    ];
    table
        .iter()
        .find(|(needles, _)| needles.iter().any(|n| message.contains(n)))
        .map_or("UNMAPPED", |(_, code)| code)
}

#[test]
fn graph_negative_vectors_fail_with_the_pinned_phrase() {
    let Some(dir) = vectors() else { return };
    let files = json_files(&dir.join("graph/negative"));
    for file in &files {
        let name = file.file_stem().unwrap().to_str().unwrap();
        let vector = read(file);
        let schema = vector["schema"].as_str().unwrap();
        let error = round_trip(schema, &vector["document"])
            .err()
            .unwrap_or_else(|| panic!("{name}: parsed but must fail"));
        assert_eq!(
            code_for(&error),
            vector["expectedCode"].as_str().unwrap(),
            "{name}: {error}"
        );
        // Every error carries a JSON location.
        assert!(error.contains(" at $"), "{name}: no location in {error}");
    }
    println!(
        "graph/negative: {} of {} vectors rejected with the pinned phrase",
        files.len(),
        files.len()
    );
    assert_eq!(files.len(), 27);
}

#[test]
fn worker_positive_vectors_round_trip() {
    let Some(dir) = vectors() else { return };
    let files = json_files(&dir.join("workers/positive"));
    for file in &files {
        let name = file.file_stem().unwrap().to_str().unwrap();
        let schema = match name {
            "policy-refusal" => "outcome",
            "artifact-receipt" => "artifact",
            _ => "descriptor",
        };
        let doc = read(file);
        let back = round_trip(schema, &doc).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(back, doc, "{name} does not round-trip");
        let forbidden = [
            "command",
            "endpoint",
            "credentialValue",
            "token",
            "bearerToken",
            "apiToken",
            "signedUrl",
            "bytes",
            "path",
            "callback",
            "url",
        ];
        assert!(
            !contains_key(&doc, &forbidden),
            "{name} carries a forbidden key"
        );
    }
    println!(
        "workers/positive: {} of {} vectors round-trip",
        files.len(),
        files.len()
    );
    assert_eq!(files.len(), 6);
}

fn contains_key(value: &Value, keys: &[&str]) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| keys.contains(&k.as_str()) || contains_key(v, keys)),
        Value::Array(items) => items.iter().any(|v| contains_key(v, keys)),
        _ => false,
    }
}

#[test]
fn worker_mock_outcomes_round_trip() {
    let Some(dir) = vectors() else { return };
    let files = json_files(&dir.join("workers/mock"));
    for file in &files {
        let vector = read(file);
        let normalized = &vector["normalized"];
        let back = round_trip("outcome", normalized).unwrap();
        assert_eq!(&back, normalized);
    }
    println!(
        "workers/mock: {} of {} outcomes round-trip",
        files.len(),
        files.len()
    );
    assert_eq!(files.len(), 2);
}

fn worker_code_for(message: &str) -> &'static str {
    let table: [(&str, &str); 12] = [
        (
            "unsupported worker protocol version/profile binding",
            "UNSUPPORTED_WORKER_BINDING",
        ),
        ("graph profiles must not be empty", "EMPTY_GRAPH_PROFILES"),
        (
            "graph profiles must not contain duplicates",
            "DUPLICATE_GRAPH_PROFILES",
        ),
        ("unknown variant `unknown`", "UNKNOWN_WORKER_ERROR"),
        (
            "worker errors must contain timeout, crash, malformed, and refusal",
            "INCOMPLETE_WORKER_ERRORS",
        ),
        (
            "artifact type IDs must not be empty",
            "EMPTY_ARTIFACT_TYPES",
        ),
        (
            "credential handles must not contain duplicates",
            "DUPLICATE_CREDENTIAL_REQUIREMENTS",
        ),
        (
            "legacy.zeroshot.ship@1 must use its pinned binding",
            "INVALID_LEGACY_BINDING",
        ),
        (
            "descriptors must not declare credential requirements",
            "INVALID_BUILTIN_BINDING",
        ),
        ("unknown field", "FORBIDDEN_FIELD"),
        (
            "code and failure reason are inconsistent",
            "INVALID_FAILURE_PAIR",
        ),
        (
            "worker errors must not contain duplicates",
            "DUPLICATE_WORKER_ERRORS",
        ),
    ];
    table
        .iter()
        .find(|(needle, _)| message.contains(needle))
        .map_or("UNMAPPED", |(_, c)| c)
}

#[test]
fn worker_negative_descriptor_and_outcome_vectors_are_rejected() {
    let Some(dir) = vectors() else { return };
    let mut checked = 0;
    for file in json_files(&dir.join("workers/negative")) {
        let name = file.file_stem().unwrap().to_str().unwrap().to_owned();
        let vector = read(&file);
        let kind = vector["fixtureKind"].as_str().unwrap();
        if kind == "compatibility" {
            continue; // run by the verifier's conformance suite
        }
        let error = round_trip(kind, &vector["document"])
            .err()
            .unwrap_or_else(|| panic!("{name}: parsed but must fail"));
        assert_eq!(
            worker_code_for(&error),
            vector["expectedCode"].as_str().unwrap(),
            "{name}: {error}"
        );
        checked += 1;
    }
    println!("workers/negative: {checked} of {checked} descriptor/outcome vectors rejected");
    assert_eq!(checked, 25);
}

#[test]
fn reference_templates_parse_and_round_trip() {
    let Some(dir) = vectors() else { return };
    let files = json_files(&dir.join("../zeroshot-templates"));
    for file in &files {
        let doc = read(file);
        let back = round_trip("graph", &doc).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(back, doc, "{} does not round-trip", file.display());
    }
    println!(
        "zeroshot-templates: {} of {} parse and round-trip",
        files.len(),
        files.len()
    );
    assert_eq!(files.len(), 5);
}
