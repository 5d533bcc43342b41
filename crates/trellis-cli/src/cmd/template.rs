//! `trellis template list|show`: the built-in graphs.

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum TemplateCommand {
    /// List the built-in templates.
    List {
        /// Print a JSON array of names instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print a template's graph document (GraphSpec JSON).
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Template name, as listed by `trellis template list`.
    pub name: String,
    /// Show the variant that delivers the accepted change with `git push`.
    #[arg(long)]
    pub push: bool,
}

pub fn run(command: &TemplateCommand) -> anyhow::Result<u8> {
    match command {
        TemplateCommand::List { json } => {
            let templates = trellis_runtime::templates();
            if *json {
                let names: Vec<&str> = templates.iter().map(|t| t.name).collect();
                outln!("{}", serde_json::to_string(&names)?);
            } else {
                for t in &templates {
                    let push = if t.supports_push { " (--push)" } else { "" };
                    outln!("{:<16} {}{push}", t.name, t.description);
                }
            }
            Ok(0)
        }
        TemplateCommand::Show(args) => {
            let template = trellis_runtime::template(&args.name).ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown template {:?}; `trellis template list` shows the built-in ones",
                    args.name
                )
            })?;
            let text = template.document(args.push).ok_or_else(|| {
                anyhow::anyhow!("template {} has no push delivery variant", args.name)
            })?;
            out!("{text}");
            Ok(0)
        }
    }
}
