//! The exported JSON Schema accepts what the parser accepts on the public vectors and the
//! reference templates, and rejects the negative graph vectors.

use serde_json::Value;
use trellis_graph::GraphSpec;
use trellis_graph::conformance::{json_files, require};
use trellis_graph::schema::graph_json_schema;

fn read(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn schema_agrees_with_the_parser_on_the_vectors() {
    let Some(dir) = require(env!("CARGO_MANIFEST_DIR")).unwrap_or_else(|e| panic!("{e}")) else {
        return;
    };
    let validator = jsonschema::draft202012::new(&graph_json_schema()).expect("schema compiles");
    let mut accepted = 0;
    let positives = json_files(&dir.join("openengine-v1/graph/positive"))
        .into_iter()
        .filter(|p| p.ends_with("full-all-nodes.json") || p.ends_with("single-worker.json"))
        .chain(json_files(&dir.join("zeroshot-templates")));
    for file in positives {
        let doc = read(&file);
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", file.display());
        accepted += 1;
    }
    let mut rejected = 0;
    for file in json_files(&dir.join("openengine-v1/graph/negative")) {
        let vector = read(&file);
        if vector["schema"] != "graph" {
            continue;
        }
        let doc = &vector["document"];
        assert!(GraphSpec::parse(doc, &Default::default()).is_err());
        assert!(
            !validator.is_valid(doc),
            "{} passes the schema",
            file.display()
        );
        rejected += 1;
    }
    println!("json schema: {accepted} graphs accepted, {rejected} negative graphs rejected");
    assert_eq!((accepted, rejected), (7, 20));
}
