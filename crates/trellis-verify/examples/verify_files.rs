//! Verifies graph files against the built-in registry and prints one line per file:
//! `path status diagnostics`. With `--analyze` only the analyzer runs (no registry), which is
//! how verdicts are compared with tools that synthesize a registry from the graph.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let analyze_only = args.iter().any(|a| a == "--analyze");
    for path in args.iter().filter(|a| *a != "--analyze") {
        let line = match std::fs::read_to_string(&path) {
            Err(e) => format!("read error {e}"),
            Ok(text) => match trellis_graph::GraphSpec::from_json_str(&text) {
                Err(e) => format!("parse-error {e}"),
                Ok(spec) if analyze_only => {
                    let diagnostics = trellis_verify::analyze(&spec);
                    let status = if diagnostics.is_empty() {
                        "verified"
                    } else {
                        "rejected"
                    };
                    let list = serde_json::to_string(&diagnostics).unwrap_or_default();
                    format!("\"{status}\" {list}")
                }
                Ok(spec) => {
                    let envelope = trellis_verify::verify_builtin(&spec).envelope();
                    format!("{} {}", envelope["status"], envelope["diagnostics"])
                }
            },
        };
        println!("{path} {line}");
    }
}
