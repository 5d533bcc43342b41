//! `trellis --target NAME profile …`: the profile commands sent to a team server, which keeps
//! the profiles in its own state directory and admits them with its own environment. The
//! documents are read here and sent; output is the same as the local commands'.

use reqwest::Method;
use serde_json::{Value, json};
use trellis_runtime::diagnostics::GraphDiagnostic;

use crate::cmd::profile::{
    ProfileCommand, checked_name, definition, export, failed, print_deleted, print_listing,
    print_profile, print_saved_value, refused_graph,
};
use crate::cmd::remote::{Remote, problem_error};

pub fn run(remote: &Remote, command: &ProfileCommand) -> anyhow::Result<u8> {
    match command {
        ProfileCommand::Save(args) => {
            let name = checked_name(&args.name)?;
            let mut body = json!({"definition": definition(args)?});
            if let Some(revision) = args.revision {
                body["revision"] = json!(revision);
            }
            if args.force {
                body["force"] = json!(true);
            }
            match remote.exchange(Method::PUT, &format!("/profiles/{name}"), Some(body))? {
                Ok(saved) => print_saved_value(&saved, args.json),
                Err(problem) => refused(name, &problem, args.json),
            }
        }
        ProfileCommand::List { json } => {
            print_listing(&remote.call(Method::GET, "/profiles", None)?, *json)
        }
        ProfileCommand::Show { name, json } => {
            let name = checked_name(name)?;
            print_profile(
                &remote.call(Method::GET, &format!("/profiles/{name}"), None)?,
                *json,
            )
        }
        ProfileCommand::Export { name, output } => {
            let name = checked_name(name)?;
            let profile = remote.call(Method::GET, &format!("/profiles/{name}"), None)?;
            export(&profile, output.as_deref())
        }
        ProfileCommand::Delete {
            name,
            revision,
            force,
            json,
        } => {
            let name = checked_name(name)?;
            let query = match (revision, force) {
                (_, true) => "force=true".to_owned(),
                (Some(revision), false) => format!("revision={revision}"),
                (None, false) => String::new(),
            };
            let path = format!("/profiles/{name}?{query}");
            print_deleted(&remote.call(Method::DELETE, &path, None)?, *json)
        }
    }
}

/// A refused save, rendered as a local one is: the diagnostics of a rejected graph, else the
/// problem's message and code.
fn refused(name: &str, problem: &Value, json: bool) -> anyhow::Result<u8> {
    let code = problem["code"].as_str().unwrap_or("unknown");
    if code == "admission.graph_rejected"
        && let Ok(diagnostics) = serde_json::from_value::<Vec<GraphDiagnostic>>(
            problem["details"]["diagnostics"].clone(),
        )
    {
        return refused_graph(name, &diagnostics, json);
    }
    if code.starts_with("admission.") || code.starts_with("profile.") {
        return failed(problem["message"].as_str().unwrap_or("refused"), code, json);
    }
    Err(problem_error(problem))
}
