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

/// Time between frames: the view redraws from one `status` read per frame, never per event, so
/// it draws at most ~7 frames a second however fast the run records events.
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
    tree: Tree,
    drawn_lines: u16,
    /// Warnings (silence notices) as the run writes them.
    warnings_feed: Option<Subscription<LogEntry>>,
}

/// What the view draws: the graph's rows and the latest silence warning per node.
struct Tree {
    rows: Vec<Row>,
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

impl Tree {
    /// The lines of one frame at wall-clock time `now`.
    fn frame(&self, status: &RunStatus, now: u64) -> Vec<String> {
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
            tree: Tree {
                rows: layout.map(rows_of).unwrap_or_default(),
                warnings: HashMap::new(),
            },
            drawn_lines: 0,
            warnings_feed,
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
                self.tree.warnings.insert(node, entry.record.message);
            }
        }
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
            let lines = self.tree.frame(&status, now_ms());
            self.draw(&lines)?;
            if status.summary.terminal().is_some() {
                return summary(&status);
            }
            std::thread::sleep(REFRESH);
        }
    }
}

/// Prints the closing summary; the exit code follows the result.
fn summary(status: &RunStatus) -> anyhow::Result<u8> {
    out!("{}", summary_text(status));
    Ok(if status.summary.succeeded() { 0 } else { 1 })
}

/// The closing summary of a finished run.
fn summary_text(status: &RunStatus) -> String {
    let run = status.summary.run_id.as_str();
    match status.summary.terminal() {
        Some(TerminalResult::Succeeded { output }) if output.is_null() => {
            format!("✓ run {run} succeeded\n")
        }
        Some(TerminalResult::Succeeded { output }) => {
            format!("✓ run {run} succeeded\n  output {output}\n")
        }
        Some(TerminalResult::Failed { reason }) => {
            let mut text = format!("✗ run {run} failed: {reason}\n");
            for line in status.cause.iter().flat_map(|cause| cause.lines()) {
                text.push_str(&format!("  cause {line}\n"));
            }
            text.push_str(&format!("  see `trellis logs {run}`\n"));
            text
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use trellis_runtime::{
        ActiveExecution, CauseNode, Cursor, ExecutionSummary, LayoutNode, OutcomeSummary,
        PhaseStatus, RunCause, RunKind, RunSummary, TokenUsage,
    };

    use super::*;

    const START: u64 = 1_700_000_000_000;

    fn node(name: &str, kind: &'static str, depth: u32) -> LayoutNode {
        LayoutNode {
            name: name.to_owned(),
            kind,
            parent: None,
            depth,
            executable: matches!(kind, "step" | "verifier"),
            worker: None,
            max_iterations: None,
            max_items: None,
        }
    }

    fn execution(id: u64, node: &str, phase: ExecutionPhase) -> ExecutionSummary {
        ExecutionSummary {
            id,
            reference: format!("ex-{id}"),
            node: node.to_owned(),
            map_indices: vec![],
            attempt: 1,
            worker: format!("command.{node}@1"),
            phase,
            outcome: None,
            started_at_ms: START + 1_000 * id,
            ended_at_ms: None,
            token_usage: None,
            reused_from: None,
            settled_by: None,
            void_reason: None,
        }
    }

    fn outcome(
        status: &'static str,
        code: Option<&'static str>,
        signal: Option<&str>,
    ) -> OutcomeSummary {
        OutcomeSummary {
            status,
            code,
            signals: signal
                .map(|label| BTreeMap::from([("verdict".to_owned(), label.to_owned())]))
                .unwrap_or_default(),
        }
    }

    fn status(phase: PhaseStatus, executions: Vec<ExecutionSummary>) -> RunStatus {
        RunStatus {
            summary: RunSummary {
                run_id: RunId::new("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b").unwrap(),
                title: "Add a --verbose flag".to_owned(),
                kind: RunKind::Graphspec,
                template: Some("software-change".to_owned()),
                graph_identity: None,
                at_cursor: Cursor::at(12).unwrap(),
                status: phase,
                created_at_ms: START,
                started_at_ms: Some(START + 50),
                finished_at_ms: None,
                token_usage: TokenUsage {
                    input_tokens: 12_345,
                    output_tokens: 678,
                    cost_usd: Some(0.125),
                    ..TokenUsage::default()
                },
                predecessor: None,
                successor: None,
                worktree: None,
            },
            force_stop_requested: false,
            executions_started: executions.len() as u64,
            controller: None,
            executions,
            cause: None,
            gap_end: None,
        }
    }

    /// A repair round in progress: the worker crashed once then succeeded, one reviewer
    /// rejected, the other still runs (and went quiet).
    #[test]
    fn a_frame_shows_each_node_with_its_state() {
        let layout = GraphLayout {
            nodes: vec![
                node("run", "seq", 0),
                node("work", "step", 1),
                node("reviews", "par", 1),
                node("acceptance", "verifier", 2),
                node("code", "verifier", 2),
                node("deliver", "verifier", 1),
                node("done", "succeed", 1),
            ],
        };
        let mut crashed = execution(1, "work", ExecutionPhase::Completed);
        crashed.outcome = Some(outcome("error", Some("crash"), None));
        let mut worked = execution(2, "work", ExecutionPhase::Completed);
        worked.outcome = Some(outcome("verified", None, None));
        let mut rejected = execution(3, "acceptance", ExecutionPhase::Completed);
        rejected.outcome = Some(outcome("verifier", None, Some("rejected")));
        let reviewing = execution(4, "code", ExecutionPhase::Active);
        let running = PhaseStatus::Running {
            active_executions: vec![ActiveExecution {
                execution: "ex-4".to_owned(),
                node: trellis_runtime::diagnostics::NodeName::new("code").unwrap(),
            }],
        };
        let status = status(running, vec![crashed, worked, rejected, reviewing]);
        let mut tree = Tree {
            rows: rows_of(&layout),
            warnings: HashMap::new(),
        };
        tree.warnings.insert(
            "code".to_owned(),
            "no output for 5m from node code".to_owned(),
        );
        insta::assert_snapshot!(tree.frame(&status, START + 65_250).join("\n"));
    }

    #[test]
    fn the_summary_says_how_the_run_ended() {
        let succeeded = status(
            PhaseStatus::Finished {
                terminal_result: TerminalResult::Succeeded {
                    output: serde_json::json!({"result": 42}),
                },
            },
            vec![],
        );
        let mut failed = status(
            PhaseStatus::Finished {
                terminal_result: TerminalResult::Failed {
                    reason: "worker_failed".to_owned(),
                },
            },
            vec![],
        );
        failed.cause = Some(RunCause {
            reason: "worker_failed".to_owned(),
            nodes: vec![CauseNode {
                node: "work".to_owned(),
                execution: "ex-1".to_owned(),
                execution_id: 1,
                status: "error",
                channel: Some("refusal"),
                reason: Some("authentication_required"),
                signals: BTreeMap::new(),
                diagnostic: None,
                message: Some(
                    "Claude Code is not signed in: run \"claude\" once, or export \
                     ANTHROPIC_API_KEY"
                        .to_owned(),
                ),
            }],
            environment: None,
        });
        insta::assert_snapshot!(format!(
            "{}{}",
            summary_text(&succeeded),
            summary_text(&failed)
        ));
    }
}
