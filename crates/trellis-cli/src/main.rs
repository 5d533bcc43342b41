//! The `trellis` binary: validate, run, observe and control typed workflow graphs.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Trellis runs typed, statically verified workflow graphs whose steps are coding agents,
/// commands, tools and scripts. Every graph is proven well-typed and bounded before it runs;
/// every run is recorded in a local ledger and can be watched, stopped and resumed.
#[derive(Debug, Parser)]
#[command(
    name = "trellis",
    version,
    after_help = "Start with `trellis template list`, `trellis validate GRAPH.json`, or\n\
                  `trellis run --template software-change --task \"…\"` inside a git repository.\n\
                  State lives in $TRELLIS_HOME (default ~/.local/state/trellis)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print a JSON Schema of a document Trellis reads (for editors).
    Schema(cmd::schema::SchemaArgs),
    /// List or show the built-in graph templates.
    #[command(subcommand)]
    Template(cmd::template::TemplateCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Command::Schema(args) => cmd::schema::run(args),
        Command::Template(command) => cmd::template::run(command),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("trellis: error: {error:#}");
            ExitCode::from(1)
        }
    }
}
