//! `trellis schema`: prints JSON Schemas of the documents Trellis reads and the lines it
//! prints.

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SchemaKind {
    /// GraphSpec openengine.graph.full/v1 (graph.json).
    Graph,
    /// One line of `trellis run --json` / `trellis watch --json` (and of the run API's watch
    /// stream) after the `{"runId"}` receipt.
    WatchUpdate,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which document's schema to print.
    #[arg(value_enum)]
    pub kind: SchemaKind,
}

pub fn run(args: &SchemaArgs) -> anyhow::Result<u8> {
    let schema = match args.kind {
        SchemaKind::Graph => trellis_runtime::graph_json_schema(),
        SchemaKind::WatchUpdate => trellis_runtime::watch_update_json_schema(),
    };
    outln!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(0)
}
