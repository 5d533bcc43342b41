//! The fake `claude` itself (Claude Code's `--print --output-format stream-json`): both
//! Trellis and the reference start it, it answers each execution as [`super::choose`] says,
//! and it logs every execution it saw.
//!
//! State lives in `$TRELLIS_FAKE_AGENT_STATE` (neither tool passes arbitrary variables to the
//! CLI, so the test puts a wrapper script named `claude` on `PATH` that sets it):
//! `calls/<key>.<n>` claims the n-th execution of a (node, input) pair, `sessions/<id>` holds
//! the behaviour a resumed correction turn continues, and `executions.jsonl` gets one line per
//! execution (`{"node", "input", "call", "resumed", "behaviour"}`). A file `script` (one behaviour name per
//! line: `reply`, `malformed`, `crash`) overrides the hash for the first executions, in order.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{Behaviour, PromptFacts, choose, fnv, malformed_reply};
use serde_json::{Value, json};

/// Names the fake's state directory; set by the `claude` wrapper script the test writes.
pub const STATE_ENV: &str = "TRELLIS_FAKE_AGENT_STATE";

/// Acts as `claude` with this process's arguments and standard streams.
pub fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("trellis-fake-claude: {error}");
            ExitCode::from(70)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    if has("--version") {
        println!("2.1.328 (Claude Code)");
        return Ok(ExitCode::SUCCESS);
    }
    if args.first().map(String::as_str) == Some("auth") {
        println!("{}", json!({"loggedIn": true, "authMethod": "api_key"}));
        return Ok(ExitCode::SUCCESS);
    }
    let mut stdin = String::new();
    // The reference's start-up probe (`--input-format stream-json`) sends one control
    // request; an early exit is an answer it accepts.
    if args
        .windows(2)
        .any(|w| w[0] == "--input-format" && w[1] == "stream-json")
    {
        let _ = std::io::stdin().read_line(&mut stdin);
        return Ok(ExitCode::SUCCESS);
    }
    std::io::stdin()
        .read_to_string(&mut stdin)
        .map_err(|e| format!("stdin: {e}"))?;
    let state = PathBuf::from(std::env::var_os(STATE_ENV).ok_or(format!("{STATE_ENV} unset"))?);
    let resume = args
        .windows(2)
        .find(|w| w[0] == "--resume")
        .map(|w| w[1].clone());

    let (session, behaviour) = match PromptFacts::parse(&stdin) {
        Some(facts) => {
            let call = claim_call(&state, facts.key())?;
            let behaviour = scripted(&state, &facts, call)?.unwrap_or_else(|| choose(&facts, call));
            append_execution(&state, &facts, call, resume.is_some(), &behaviour)?;
            let session = resume.unwrap_or_else(|| new_session_id(facts.key(), call));
            (session, behaviour)
        }
        // A correction turn continues the execution's session and behaviour.
        None => {
            let session = resume.ok_or("a correction turn without --resume")?;
            let stored = std::fs::read_to_string(state.join("sessions").join(&session))
                .map_err(|e| format!("session {session}: {e}"))?;
            let behaviour = match serde_json::from_str::<Value>(&stored) {
                Ok(reply) if stored.trim() != "malformed" => Behaviour::Reply(reply),
                _ => Behaviour::Malformed,
            };
            (session, behaviour)
        }
    };
    remember(&state, &session, &behaviour)?;
    emit(&json!({"type": "system", "subtype": "init", "session_id": session, "model": "fake"}));
    let structured = match behaviour {
        Behaviour::Crash => return Ok(ExitCode::from(1)),
        Behaviour::Malformed => malformed_reply(),
        Behaviour::Reply(reply) => json!({"response": reply}),
    };
    emit(&json!({
        "type": "result", "subtype": "success", "is_error": false, "num_turns": 1,
        "result": structured.to_string(), "structured_output": structured,
        "session_id": session,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }));
    Ok(ExitCode::SUCCESS)
}

fn emit(event: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{event}");
    let _ = out.flush();
}

/// Claims the next call number of `key` by creating its file (atomic across concurrent
/// executions).
fn claim_call(state: &Path, key: u64) -> Result<u64, String> {
    let calls = state.join("calls");
    std::fs::create_dir_all(&calls).map_err(|e| format!("{}: {e}", calls.display()))?;
    for call in 1.. {
        let claim = calls.join(format!("{key:016x}.{call}"));
        match OpenOptions::new().write(true).create_new(true).open(&claim) {
            Ok(_) => return Ok(call),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("{}: {e}", claim.display())),
        }
    }
    Err("no call number left".into())
}

/// The scripted behaviour of the overall n-th execution, when `script` names one.
fn scripted(state: &Path, facts: &PromptFacts, call: u64) -> Result<Option<Behaviour>, String> {
    let Ok(script) = std::fs::read_to_string(state.join("script")) else {
        return Ok(None);
    };
    let seen = std::fs::read_to_string(state.join("executions.jsonl"))
        .map(|log| log.lines().count())
        .unwrap_or(0);
    Ok(match script.lines().nth(seen).map(str::trim) {
        Some("crash") => Some(Behaviour::Crash),
        Some("malformed") => Some(Behaviour::Malformed),
        Some("reply") => match choose(facts, call) {
            Behaviour::Reply(reply) => Some(Behaviour::Reply(reply)),
            // A scripted reply when the hash chose a failure: the first valid reply after it.
            _ => (call + 1..call + 1000)
                .map(|n| choose(facts, n))
                .find(|b| matches!(b, Behaviour::Reply(_))),
        },
        Some(other) if !other.is_empty() => return Err(format!("unknown script line {other:?}")),
        _ => None,
    })
}

fn new_session_id(key: u64, call: u64) -> String {
    let salt = fnv(format!("{}:{}", std::process::id(), call).as_bytes());
    let (a, b) = (key ^ salt, salt.rotate_left(17) ^ call);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

fn remember(state: &Path, session: &str, behaviour: &Behaviour) -> Result<(), String> {
    let sessions = state.join("sessions");
    std::fs::create_dir_all(&sessions).map_err(|e| format!("{}: {e}", sessions.display()))?;
    let text = match behaviour {
        Behaviour::Reply(reply) => reply.to_string(),
        _ => "malformed".to_owned(),
    };
    std::fs::write(sessions.join(session), text).map_err(|e| format!("session file: {e}"))
}

fn append_execution(
    state: &Path,
    facts: &PromptFacts,
    call: u64,
    resumed: bool,
    behaviour: &Behaviour,
) -> Result<(), String> {
    let line = json!({"node": facts.node(), "input": facts.input, "call": call,
                      "resumed": resumed, "behaviour": behaviour.name()});
    let path = state.join("executions.jsonl");
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // One write per line: concurrent appends never interleave.
    log.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))
}
