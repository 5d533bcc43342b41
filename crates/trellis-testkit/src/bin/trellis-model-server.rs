//! Serves a script file on loopback for manual experiments and prints the URLs to point CLIs at.

use std::path::PathBuf;
use std::process::ExitCode;

use trellis_testkit::{ModelServer, Script, ServerOptions};

const USAGE: &str =
    "usage: trellis-model-server SCRIPT.json [--port N] [--record FILE.jsonl] [--api-key KEY] [--quiet]

Serves the scripted model on 127.0.0.1 until interrupted. Prints the base URLs on stdout:
  ANTHROPIC_BASE_URL=http://127.0.0.1:PORT        (Claude Code)
  OPENAI_BASE_URL=http://127.0.0.1:PORT/v1        (Codex provider base_url)
Every request is logged on stderr (unless --quiet) and, with --record, appended to FILE as JSON.
With --api-key, model requests carrying another key are answered 401 like a real provider.";

struct Args {
    script: PathBuf,
    port: u16,
    options: ServerOptions,
}

fn parse_args() -> Result<Args, String> {
    let mut script = None;
    let mut port = 0;
    let mut options = ServerOptions {
        log_requests: true,
        ..ServerOptions::default()
    };
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--help" | "-h") => return Err(String::new()),
            Some("--quiet") => options.log_requests = false,
            Some("--port") => {
                let value = args.next().ok_or("--port needs a value")?;
                port = value
                    .to_str()
                    .and_then(|text| text.parse().ok())
                    .ok_or("--port needs a number 0..=65535")?;
            }
            Some("--api-key") => {
                let key = args.next().ok_or("--api-key needs a value")?;
                options.api_key = Some(key.to_string_lossy().into_owned());
            }
            Some("--record") => {
                options.record_path = Some(args.next().ok_or("--record needs a file")?.into());
            }
            Some(flag) if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            _ if script.is_none() => script = Some(PathBuf::from(arg)),
            _ => return Err("only one script file may be given".into()),
        }
    }
    Ok(Args {
        script: script.ok_or("a script file is required")?,
        port,
        options,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("trellis-model-server: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let script = match Script::load(&args.script) {
        Ok(script) => script,
        Err(error) => {
            eprintln!("trellis-model-server: {error}");
            return ExitCode::from(2);
        }
    };
    let server = match ModelServer::start_on(script, args.options, args.port).await {
        Ok(server) => server,
        Err(error) => {
            eprintln!("trellis-model-server: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("ANTHROPIC_BASE_URL={}", server.url());
    println!("OPENAI_BASE_URL={}", server.openai_base_url());
    if let Err(error) = tokio::signal::ctrl_c().await {
        eprintln!("trellis-model-server: cannot wait for Ctrl-C: {error}");
    }
    let left: Vec<String> = server
        .remaining_turns()
        .into_iter()
        .filter(|(_, left)| *left > 0)
        .map(|(name, left)| format!("{name}: {left}"))
        .collect();
    if !left.is_empty() {
        eprintln!("trellis-model-server: unserved turns: {}", left.join(", "));
    }
    server.shutdown().await;
    ExitCode::SUCCESS
}
