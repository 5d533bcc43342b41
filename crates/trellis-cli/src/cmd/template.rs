//! `trellis template list|show`: the built-in graphs.

use clap::{Args, Subcommand};
use trellis_runtime::DeliveryMode;

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
    #[arg(long, conflicts_with = "delivery")]
    pub push: bool,
    /// Show the variant of a delivery: none, push, pull_request, merge or comment.
    #[arg(long, value_name = "MODE")]
    pub delivery: Option<String>,
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
                    let flags: Vec<&str> = t
                        .deliveries
                        .iter()
                        .filter_map(|d| match d {
                            DeliveryMode::Push => Some("--push"),
                            DeliveryMode::PullRequest => Some("--pr"),
                            DeliveryMode::Merge => Some("--ship"),
                            _ => None,
                        })
                        .collect();
                    let flags = if flags.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", flags.join(", "))
                    };
                    outln!("{:<16} {}{flags}", t.name, t.description);
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
            let mode = match (&args.delivery, args.push) {
                (Some(text), _) => Some(DeliveryMode::parse(text).ok_or_else(|| {
                    anyhow::anyhow!(
                        "{text:?} is not a delivery; use none, push, pull_request, merge or comment"
                    )
                })?),
                (None, true) => Some(DeliveryMode::Push),
                (None, false) => None,
            };
            let text = template.document_for(mode).ok_or_else(|| {
                anyhow::anyhow!(
                    "template {} has no {} delivery variant",
                    args.name,
                    mode.unwrap_or(DeliveryMode::None)
                )
            })?;
            out!("{text}");
            Ok(0)
        }
    }
}
