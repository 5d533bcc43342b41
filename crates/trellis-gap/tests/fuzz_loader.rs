//! Property-based fuzzing of the loader and validator: arbitrary bytes, arbitrary JSON and
//! mutated conformance documents never panic. Case count: `TRELLIS_FUZZ_CASES` (default 64).

mod common;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use trellis_gap::{ValidateOptions, load_workflow_str, parse_workflow, validate};

fn cases() -> u32 {
    std::env::var("TRELLIS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

/// Loads and, when it loads, validates; the only requirement is not panicking.
fn exercise(value: &Value) {
    if let Ok(workflow) = parse_workflow(value, PathBuf::from(".")) {
        let issues = validate(&workflow, &ValidateOptions::default());
        for issue in issues {
            let _ = issue.to_string();
        }
    }
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("START".to_string()),
        Just("END".to_string()),
        Just("in".to_string()),
        Just("a".to_string()),
        Just("b".to_string()),
        Just("sg".to_string()),
        "[a-z$._0-9-]{0,6}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        (-1e9f64..1e9).prop_map(|f| json!(f)),
        name().prop_map(Value::String),
        name().prop_map(|n| json!({"$ref": n})),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((name(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

#[test]
fn arbitrary_bytes_never_panic_the_loader() {
    runner()
        .run(&prop::collection::vec(any::<u8>(), 0..256), |bytes| {
            let text = String::from_utf8_lossy(&bytes);
            let _ = load_workflow_str(&text, PathBuf::from("."));
            Ok(())
        })
        .unwrap();
}

#[test]
fn arbitrary_json_never_panics_loader_or_validator() {
    let shaped = (json_value(), json_value(), json_value()).prop_map(|(nodes, edges, subgraphs)| {
        json!({"version": 3, "nodes": nodes, "edges": edges, "subgraphs": subgraphs})
    });
    runner()
        .run(&prop_oneof![json_value(), shaped], |value| {
            exercise(&value);
            Ok(())
        })
        .unwrap();
}

/// Every (path, replacement) site of a document, depth-first.
fn paths(value: &Value, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(prefix.clone());
    match value {
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            let mut p = prefix.clone();
            p.push(k.clone());
            paths(v, p, out);
        }),
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| {
            let mut p = prefix.clone();
            p.push(i.to_string());
            paths(v, p, out);
        }),
        _ => {}
    }
}

fn replace_at(value: &mut Value, path: &[String], replacement: Value) {
    let mut cursor = value;
    for part in path {
        cursor = match cursor {
            Value::Object(map) => match map.get_mut(part) {
                Some(v) => v,
                None => return,
            },
            Value::Array(items) => {
                match part.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                    Some(v) => v,
                    None => return,
                }
            }
            _ => return,
        };
    }
    *cursor = replacement;
}

#[test]
fn mutated_conformance_documents_never_panic() {
    let Some(dir) = common::conformance_gap_dir() else {
        return;
    };
    let documents: Vec<Value> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    let count = documents.len();
    let strategy = (
        0..count,
        any::<prop::sample::Index>(),
        json_value(),
        1..4usize,
    );
    runner()
        .run(&strategy, |(doc_index, site, replacement, repeats)| {
            let mut doc = documents[doc_index].clone();
            for _ in 0..repeats {
                let mut sites = Vec::new();
                paths(&doc, Vec::new(), &mut sites);
                let path = sites[site.index(sites.len())].clone();
                replace_at(&mut doc, &path, replacement.clone());
            }
            exercise(&doc);
            let text = doc.to_string();
            let cut = site.index(text.len().max(1));
            let _ = load_workflow_str(&text[..text.floor_char_boundary(cut)], PathBuf::from("."));
            Ok(())
        })
        .unwrap();
}
