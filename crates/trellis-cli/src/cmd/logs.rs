//! `trellis logs` and `trellis attach`: a run's log lines, or one execution's, replayed and
//! then followed live; locally or on a team server (`--target`).

use std::io::Write;

use clap::{Args, ValueEnum};
use trellis_runtime::{LogEntry, LogFilter, LogLevel, Runtime};

use crate::cmd::observe::parse_after;
use crate::cmd::remote::{Remote, path_segment};
use crate::context::run_id;

/// The least severe lines shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LevelArg {
    Debug,
    Info,
    Warn,
    Error,
}

impl LevelArg {
    fn least(self) -> Option<LogLevel> {
        match self {
            Self::Debug => None,
            Self::Info => Some(LogLevel::Info),
            Self::Warn => Some(LogLevel::Warn),
            Self::Error => Some(LogLevel::Error),
        }
    }

    fn query_value(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Warn => "warn",
            Self::Error => "error",
        }
    }
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    trellis logs RUN                      every line, then follow until the run ends\n  \
    trellis logs RUN --execution worker   the lines of node `worker`'s latest execution\n  \
    trellis logs RUN --execution 7        the lines of execution 7 (or its reference ex-…)\n  \
    trellis logs RUN --level warn         warnings and errors only")]
pub struct LogsArgs {
    /// The run id.
    pub run: String,
    /// Start strictly after this cursor (from an earlier line's `cursor`).
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,
    /// Only this execution's lines: its id, its reference (`ex-…`, as lines print it) or its
    /// node (the node's one active execution, else its latest).
    #[arg(long, value_name = "REF")]
    pub execution: Option<String>,
    /// Only lines of this node's executions.
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    /// Only lines at least this severe.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub level: Option<LevelArg>,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    trellis attach RUN worker          follow node `worker`'s running execution\n  \
    trellis attach RUN 7 --json        execution 7's lines as NDJSON (as `logs` prints them)\n\n\
    Ctrl-C detaches; the execution and its run go on.")]
pub struct AttachArgs {
    /// The run id.
    pub run: String,
    /// The execution: its id, its reference (`ex-…`) or its node (the node's one active
    /// execution, else its latest).
    pub execution: String,
    /// Start strictly after this cursor (from an earlier line's `cursor`).
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,
    /// Print each line as the NDJSON `logs` prints, not just its message.
    #[arg(long)]
    pub json: bool,
}

pub fn logs(runtime: &Runtime, args: &LogsArgs) -> anyhow::Result<u8> {
    let run = run_id(&args.run)?;
    let after = parse_after(args.after.as_deref())?;
    let execution = match &args.execution {
        Some(reference) => Some(runtime.resolve_execution(&run, reference)?),
        None => None,
    };
    let filter = LogFilter {
        node: args.node.clone(),
        execution,
        min_level: args.level.and_then(LevelArg::least),
        until_settled: false,
    };
    let mut out = std::io::stdout().lock();
    for entry in runtime.logs(&run, after, filter)? {
        writeln!(out, "{}", serde_json::to_string(&entry?)?)?;
        out.flush()?;
    }
    Ok(0)
}

pub fn attach(runtime: &Runtime, args: &AttachArgs) -> anyhow::Result<u8> {
    let run = run_id(&args.run)?;
    let after = parse_after(args.after.as_deref())?;
    let (execution, lines) = runtime.attach(&run, &args.execution, after)?;
    let mut out = std::io::stdout().lock();
    for entry in lines {
        let entry = entry?;
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&entry)?)?;
        } else {
            writeln!(out, "{}", readable(&entry))?;
        }
        out.flush()?;
    }
    let detail = runtime.execution(&run, execution)?;
    let outcome = match &detail.summary.outcome {
        Some(outcome) => format!(": {}", serde_json::to_string(outcome)?),
        None => String::new(),
    };
    eprintln!(
        "execution {execution} ({}) {}{outcome}",
        detail.summary.node,
        serde_json::to_string(&detail.summary.phase)?.trim_matches('"')
    );
    Ok(0)
}

/// One line as a person reads it: the message, Trellis's own notes marked.
fn readable(entry: &LogEntry) -> String {
    match entry.record.target {
        "trellis" => format!("[trellis] {}", entry.record.message),
        _ => entry.record.message.clone(),
    }
}

/// The query string of a remote `logs`/`attach` stream.
fn remote_query(
    after: Option<&str>,
    execution: Option<&str>,
    node: Option<&str>,
    level: Option<LevelArg>,
    until_settled: bool,
) -> anyhow::Result<String> {
    if let Some(cursor) = after {
        parse_after(Some(cursor))?;
    }
    let mut url = reqwest::Url::parse("http://query.invalid/")?;
    {
        let mut pairs = url.query_pairs_mut();
        let given = [
            ("after", after),
            ("execution", execution),
            ("node", node),
            ("level", level.map(LevelArg::query_value)),
            ("untilSettled", until_settled.then_some("true")),
        ];
        for (name, value) in given {
            if let Some(value) = value {
                pairs.append_pair(name, value);
            }
        }
    }
    Ok(url.query().map(|q| format!("?{q}")).unwrap_or_default())
}

pub fn remote_logs(remote: &Remote, args: &LogsArgs) -> anyhow::Result<u8> {
    let run = path_segment(&args.run)?;
    let query = remote_query(
        args.after.as_deref(),
        args.execution.as_deref(),
        args.node.as_deref(),
        args.level,
        false,
    )?;
    remote.stream_data(&format!("/runs/{run}/logs{query}"), &mut |data| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{data}")?;
        out.flush()?;
        Ok(())
    })?;
    Ok(0)
}

pub fn remote_attach(remote: &Remote, args: &AttachArgs) -> anyhow::Result<u8> {
    let run = path_segment(&args.run)?;
    let query = remote_query(
        args.after.as_deref(),
        Some(&args.execution),
        None,
        None,
        true,
    )?;
    let json = args.json;
    remote.stream_data(&format!("/runs/{run}/logs{query}"), &mut |data| {
        let mut out = std::io::stdout().lock();
        if json {
            writeln!(out, "{data}")?;
        } else {
            let line: serde_json::Value = serde_json::from_str(data)?;
            let message = line["record"]["message"].as_str().unwrap_or_default();
            if line["record"]["target"] == "trellis" {
                writeln!(out, "[trellis] {message}")?;
            } else {
                writeln!(out, "{message}")?;
            }
        }
        out.flush()?;
        Ok(())
    })?;
    Ok(0)
}
