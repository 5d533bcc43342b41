//! The live view on a terminal: the graph as an indented tree with each executable's state
//! (pending, running with elapsed time, succeeded, failed with its error channel), silence
//! warnings, token usage, redrawn in place until the run ends, then a summary.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use crossterm::{cursor, execute, terminal};
use trellis_runtime::{
    Cursor, ExecutionPhase, GraphLayout, LogEntry, LogFilter, LogLevel, RunId, RunStatus, Runtime,
    Subscription, TerminalResult,
};

use crate::render::{human_ms, human_tokens};

const REFRESH: Duration = Duration::from_millis(150);

/// One line of the tree.
struct Row {
    depth: usize,
    name: String,
    executable: bool,
}

pub struct LiveView<'a> {
    runtime: &'a Runtime,
    run_id: RunId,
    rows: Vec<Row>,
    drawn_lines: u16,
    /// Warnings (silence notices) as the run writes them.
    warnings_feed: Option<Subscription<LogEntry>>,
    /// Latest silence warning per node.
    warnings: HashMap<String, String>,
}

fn rows_of(layout: &GraphLayout) -> Vec<Row> {
    layout
        .nodes
        .iter()
        .filter(|n| !matches!(n.kind, "succeed" | "fail"))
        .map(|n| Row {
            depth: n.depth as usize,
            name: n.name.clone(),
            executable: n.executable,
        })
        .collect()
}

/// What the run says about one node's executions.
#[derive(Default)]
struct NodeState {
    running: Vec<u64>,
    succeeded: usize,
    failed: Vec<String>,
    voided: usize,
    total: usize,
    /// The first signal label of the latest verifier outcome (e.g. `rejected`).
    last_signal: Option<String>,
}

fn node_states(status: &RunStatus) -> HashMap<String, NodeState> {
    let mut states: HashMap<String, NodeState> = HashMap::new();
    for e in &status.executions {
        let state = states.entry(e.node.clone()).or_default();
        state.total += 1;
        match (e.phase, &e.outcome) {
            (ExecutionPhase::Active, _) => state.running.push(e.started_at_ms),
            (ExecutionPhase::Voided, _) => state.voided += 1,
            (ExecutionPhase::Completed, Some(outcome)) => match outcome.code {
                Some(code) => state.failed.push(code.to_owned()),
                None => {
                    state.succeeded += 1;
                    if outcome.status == "verifier" {
                        state.last_signal = outcome.signals.values().next().cloned();
                    }
                }
            },
            (ExecutionPhase::Completed, None) => state.succeeded += 1,
        }
    }
    states
}

fn describe(state: Option<&NodeState>, now: u64) -> String {
    let Some(state) = state else {
        return "· pending".to_owned();
    };
    let rounds = if state.total > 1 {
        format!("  ({} runs)", state.total)
    } else {
        String::new()
    };
    if let Some(&started) = state.running.iter().min() {
        let extra = if state.running.len() > 1 {
            format!(" ×{}", state.running.len())
        } else {
            String::new()
        };
        return format!(
            "● running{extra} {}{rounds}",
            human_ms(now.saturating_sub(started))
        );
    }
    match state.failed.last() {
        Some(code) if state.succeeded == 0 => format!("✗ failed: {code}{rounds}"),
        _ if state.voided == state.total => "– voided".to_owned(),
        _ => match &state.last_signal {
            Some(label) => format!("✓ {label}{rounds}"),
            None => format!("✓ succeeded{rounds}"),
        },
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl<'a> LiveView<'a> {
    pub fn new(runtime: &'a Runtime, run_id: RunId, layout: Option<&GraphLayout>) -> Self {
        let warnings = LogFilter {
            min_level: Some(LogLevel::Warn),
            ..LogFilter::default()
        };
        let warnings_feed = runtime
            .logs(&run_id, Cursor::START, warnings)
            .ok()
            .map(|stream| stream.subscribe());
        Self {
            runtime,
            run_id,
            rows: layout.map(rows_of).unwrap_or_default(),
            drawn_lines: 0,
            warnings_feed,
            warnings: HashMap::new(),
        }
    }

    fn collect_warnings(&mut self) {
        let Some(feed) = &mut self.warnings_feed else {
            return;
        };
        while let Some(entry) = feed.try_next() {
            // A broken feed only costs the warnings; the tree keeps updating.
            let Ok(entry) = entry else { break };
            if entry.record.level == LogLevel::Warn
                && let Some(node) = entry.node
            {
                self.warnings.insert(node, entry.record.message);
            }
        }
    }

    fn frame(&self, status: &RunStatus) -> Vec<String> {
        let now = now_ms();
        let summary = &status.summary;
        let started = summary.started_at_ms.unwrap_or(summary.created_at_ms);
        let end = summary.finished_at_ms.unwrap_or(now);
        let mut lines = vec![format!(
            "{}  {}  {}",
            summary.title,
            summary.phase().as_str(),
            human_ms(end.saturating_sub(started))
        )];
        let states = node_states(status);
        for row in &self.rows {
            let indent = "  ".repeat(row.depth);
            if row.executable {
                let state = states.get(&row.name);
                let label = format!("{indent}{}", row.name);
                let mut line = format!("{label:<36} {}", describe(state, now));
                let still_running = state.is_some_and(|s| !s.running.is_empty());
                if let (true, Some(warning)) = (still_running, self.warnings.get(&row.name)) {
                    line.push_str(&format!("  ⚠ {warning}"));
                }
                lines.push(line);
            } else {
                lines.push(format!("{indent}{}", row.name));
            }
        }
        let usage = &summary.token_usage;
        if usage.input_tokens + usage.output_tokens > 0 {
            lines.push(format!("tokens {}", human_tokens(usage)));
        }
        lines
    }

    fn draw(&mut self, lines: &[String]) -> anyhow::Result<()> {
        let mut out = std::io::stdout().lock();
        if self.drawn_lines > 0 {
            execute!(
                out,
                cursor::MoveUp(self.drawn_lines),
                terminal::Clear(terminal::ClearType::FromCursorDown)
            )?;
        }
        // A pseudo-terminal without a size reports 0 columns: treat it as unknown.
        let width = match terminal::size() {
            Ok((columns, _)) if columns > 0 => usize::from(columns).max(20),
            _ => 120,
        };
        for line in lines {
            let clipped: String = line.chars().take(width - 1).collect();
            writeln!(out, "{clipped}")?;
        }
        out.flush()?;
        self.drawn_lines = u16::try_from(lines.len()).unwrap_or(u16::MAX);
        Ok(())
    }

    /// Redraws until the run ends, then prints the summary and returns the exit code.
    pub fn run(mut self) -> anyhow::Result<u8> {
        loop {
            // Reading the status also finalizes a run whose controller died.
            let status = self.runtime.status(&self.run_id)?;
            self.collect_warnings();
            let lines = self.frame(&status);
            self.draw(&lines)?;
            if status.summary.terminal().is_some() {
                return summary(&status);
            }
            std::thread::sleep(REFRESH);
        }
    }
}

fn summary(status: &RunStatus) -> anyhow::Result<u8> {
    let run = status.summary.run_id.as_str();
    match status.summary.terminal() {
        Some(TerminalResult::Succeeded { output }) => {
            outln!("✓ run {run} succeeded");
            if !output.is_null() {
                outln!("  output {output}");
            }
            Ok(0)
        }
        Some(TerminalResult::Failed { reason }) => {
            outln!("✗ run {run} failed: {reason}");
            outln!("  see `trellis logs {run}`");
            Ok(1)
        }
        None => Ok(1),
    }
}
