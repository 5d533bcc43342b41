//! Serves the fake GitHub on loopback for subprocess tests and prints its API URL.

use std::path::PathBuf;
use std::process::ExitCode;

use trellis_testkit::github::{FakeGitHub, GitHubOptions};

const USAGE: &str = "usage: trellis-fake-github --token-env VARIABLE [--seed FILE.json] [--port N]

Serves a fake GitHub REST API on 127.0.0.1 until interrupted and prints
  GITHUB_API_URL=http://127.0.0.1:PORT
on stdout. It accepts only the token held by the environment variable VARIABLE.
The seed file holds a list of actions (the format of POST /__fake/actions).
Scripting while it runs: POST /__fake/actions; the call record: GET /__fake/calls.";

struct Args {
    token_variable: String,
    seed: Option<PathBuf>,
    port: u16,
}

fn parse_args() -> Result<Args, String> {
    let mut token_variable = None;
    let mut seed = None;
    let mut port = 0;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--help" | "-h" => return Err(String::new()),
            "--token-env" => token_variable = Some(args.next().ok_or("--token-env needs a name")?),
            "--seed" => seed = Some(PathBuf::from(args.next().ok_or("--seed needs a file")?)),
            "--port" => {
                port = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--port needs a number 0..=65535")?;
            }
            other => return Err(format!("unexpected argument {other}")),
        }
    }
    Ok(Args {
        token_variable: token_variable.ok_or("--token-env is required")?,
        seed,
        port,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("trellis-fake-github: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let Ok(token) = std::env::var(&args.token_variable) else {
        eprintln!(
            "trellis-fake-github: the variable {} is not set",
            args.token_variable
        );
        return ExitCode::from(2);
    };
    let seed = match &args.seed {
        None => None,
        Some(path) => match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
        {
            Ok(value) => Some(value),
            Err(error) => {
                eprintln!("trellis-fake-github: seed {}: {error}", path.display());
                return ExitCode::from(2);
            }
        },
    };
    let server = match FakeGitHub::start_on(GitHubOptions::new(&token), args.port).await {
        Ok(server) => server,
        Err(error) => {
            eprintln!("trellis-fake-github: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(seed) = seed
        && let Err(error) = server.apply_json(&seed)
    {
        eprintln!("trellis-fake-github: seed: {error}");
        return ExitCode::from(2);
    }
    println!("GITHUB_API_URL={}", server.api_url());
    if let Err(error) = tokio::signal::ctrl_c().await {
        eprintln!("trellis-fake-github: cannot wait for Ctrl-C: {error}");
    }
    server.shutdown().await;
    ExitCode::SUCCESS
}
