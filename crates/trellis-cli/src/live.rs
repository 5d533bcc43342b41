//! The live view on a terminal: the graph as an indented tree with each executable's state
//! (pending, running with elapsed time, succeeded, failed with its error channel), silence
//! warnings, token usage, redrawn in place until the run ends, then a summary.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use crossterm::{cursor, execute, terminal};
use trellis_graph::{GraphNode, GraphSpec, WorkerOutcome};
use trellis_ledger::{
    Cursor, EventFilter, ExecutionState, LogLevel, RunEvent, RunId, RunSnapshot, TerminalResult,
};

use crate::context::Context;
use crate::render::{human_ms, human_tokens};

const REFRESH: Duration = Duration::from_millis(150);

/// One line of the tree.
struct Row {
    depth: usize,
    name: String,
    executable: bool,
}

pub struct LiveView<'a> {
    ctx: &'a Context,
    run_id: RunId,
    rows: Vec<Row>,
    drawn_lines: u16,
    log_cursor: Cursor,
    /// Latest silence warning per node.
    warnings: HashMap<String, String>,
}

fn rows_of(spec: &GraphSpec) -> Vec<Row> {
    fn walk(node: &GraphNode, depth: usize, rows: &mut Vec<Row>) {
        if matches!(node, GraphNode::Succeed(_) | GraphNode::Fail(_)) {
            return;
        }
        rows.push(Row {
            depth,
            name: node.name().to_string(),
            executable: node.executable().is_some(),
        });
        for child in node.children() {
            walk(child, depth + 1, rows);
        }
    }
    let mut rows = Vec::new();
    walk(&spec.root, 0, &mut rows);
    rows
}

/// What the ledger says about one node's executions.
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

fn node_states(snapshot: &RunSnapshot) -> HashMap<String, NodeState> {
    let mut states: HashMap<String, NodeState> = HashMap::new();
    for e in snapshot.executions.values() {
        let state = states.entry(e.node.to_string()).or_default();
        state.total += 1;
        match &e.state {
            ExecutionState::Active {} => state.running.push(e.started_at_ms),
            ExecutionState::Completed { outcome, .. } => match outcome.as_ref() {
                WorkerOutcome::Error { code, .. } => state.failed.push(code.as_str().to_owned()),
                WorkerOutcome::Verifier { signals, .. } => {
                    state.succeeded += 1;
                    state.last_signal = signals.values().next().map(|l| l.to_string());
                }
                WorkerOutcome::Verified { .. } => state.succeeded += 1,
            },
            ExecutionState::Voided { .. } => state.voided += 1,
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

impl<'a> LiveView<'a> {
    pub fn new(ctx: &'a Context, run_id: RunId, spec: Option<&GraphSpec>) -> anyhow::Result<Self> {
        Ok(Self {
            ctx,
            run_id,
            rows: spec.map(rows_of).unwrap_or_default(),
            drawn_lines: 0,
            log_cursor: Cursor::START,
            warnings: HashMap::new(),
        })
    }

    fn collect_warnings(&mut self, snapshot: &RunSnapshot) -> anyhow::Result<()> {
        let events = self.ctx.store.events_after(
            &self.run_id,
            self.log_cursor,
            1000,
            EventFilter::LogsOnly,
        )?;
        for stored in events {
            self.log_cursor = stored.cursor;
            if let RunEvent::Log {
                execution: Some(id),
                level: LogLevel::Warn,
                message,
                ..
            } = &stored.event
                && let Some(e) = snapshot.executions.get(id)
            {
                self.warnings.insert(e.node.to_string(), message.clone());
            }
        }
        Ok(())
    }

    fn frame(&self, snapshot: &RunSnapshot) -> Vec<String> {
        let now = trellis_ledger::store::now_ms();
        let head = &snapshot.head;
        let started = head.progress.started_at_ms.unwrap_or(head.created_at_ms);
        let end = head.progress.finished_at_ms.unwrap_or(now);
        let mut lines = vec![format!(
            "{}  {}  {}",
            head.title,
            head.progress.phase.as_str(),
            human_ms(end.saturating_sub(started))
        )];
        let states = node_states(snapshot);
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
        let usage = &head.progress.token_usage;
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
        let mut last_check = std::time::Instant::now();
        loop {
            let snapshot = self.ctx.store.snapshot(&self.run_id)?;
            self.collect_warnings(&snapshot)?;
            let lines = self.frame(&snapshot);
            self.draw(&lines)?;
            if snapshot.head.is_finished() {
                return summary(&snapshot);
            }
            if last_check.elapsed() > Duration::from_millis(500) {
                self.ctx.reconcile(&self.run_id)?;
                last_check = std::time::Instant::now();
            }
            std::thread::sleep(REFRESH);
        }
    }
}

fn summary(snapshot: &RunSnapshot) -> anyhow::Result<u8> {
    let run = snapshot.head.run_id.as_str();
    match &snapshot.head.progress.terminal {
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
