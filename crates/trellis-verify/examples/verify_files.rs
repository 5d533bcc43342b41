//! Verifies graph files against the built-in registry and prints one line per file:
//! `path status diagnostics`. A development aid for comparing verdicts across tools.

fn main() {
    for path in std::env::args().skip(1) {
        let line = match std::fs::read_to_string(&path) {
            Err(e) => format!("read error {e}"),
            Ok(text) => match trellis_graph::GraphSpec::from_json_str(&text) {
                Err(e) => format!("parse-error {e}"),
                Ok(spec) => {
                    let envelope = trellis_verify::verify_builtin(&spec).envelope();
                    format!("{} {}", envelope["status"], envelope["diagnostics"])
                }
            },
        };
        println!("{path} {line}");
    }
}
