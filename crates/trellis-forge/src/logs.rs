//! Bounded, labelled excerpts of GitHub Actions job logs for failing checks: the tail of the
//! log (last lines, last bytes) without ANSI escapes or GitHub's timestamp prefixes, or a short
//! note when the log cannot be read — never an error.

use serde::Serialize;

use crate::client::Op;
use crate::{GitHub, RepoRef};

/// Lines and bytes an excerpt keeps at most (the end of the log, where failures show).
pub const LOG_EXCERPT_LINES: usize = 60;
pub const LOG_EXCERPT_BYTES: usize = 8 * 1024;
/// How much of the log's end is downloaded before cleaning (escapes and timestamps shrink it).
const FETCH_TAIL_BYTES: usize = 64 * 1024;

/// The end of one check's job log, or why it is missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogExcerpt {
    /// The check run (job) the log belongs to.
    pub check: String,
    /// The last lines of the log, cleaned; empty when `note` says why there is none.
    pub text: String,
    /// Lines in `text`.
    pub lines: usize,
    /// True when the log had more than `text` shows.
    pub truncated: bool,
    /// Why the log is not shown (expired, no permission…); `None` when `text` holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl LogExcerpt {
    /// The excerpt as a labelled block of a diagnostic.
    pub fn describe(&self) -> String {
        if let Some(note) = &self.note {
            return format!("log of {}: {note}", self.check);
        }
        let which = if self.truncated {
            format!("last {} lines", self.lines)
        } else {
            format!("{} lines", self.lines)
        };
        format!(
            "log of {} ({which}):\n```text\n{}\n```",
            self.check,
            self.text.replace("```", "'''")
        )
    }

    fn note(check: &str, note: String) -> LogExcerpt {
        LogExcerpt {
            check: check.to_owned(),
            text: String::new(),
            lines: 0,
            truncated: false,
            note: Some(note),
        }
    }
}

/// Removes ANSI escape sequences: CSI (`ESC [ … final`), OSC (`ESC ] … BEL` or `ESC \`),
/// two-byte escapes, and stray control characters other than tab and newline.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                _ => {}
            },
            // CSI introduced by its 8-bit form.
            '\u{9b}' => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            '\t' | '\n' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// GitHub prefixes every job log line with an RFC 3339 timestamp and a space
/// (`2026-01-01T12:00:00.1234567Z `); this removes it, and the byte-order mark GitHub starts
/// logs with.
fn strip_timestamp(line: &str) -> &str {
    let line = line.trim_start_matches('\u{feff}');
    let bytes = line.as_bytes();
    let shaped = bytes.len() > 20
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T'
        && bytes[13] == b':'
        && bytes[..4].iter().all(u8::is_ascii_digit);
    if !shaped {
        return line;
    }
    match line.find('Z') {
        Some(end) if end < 40 => {
            let rest = &line[end + 1..];
            rest.strip_prefix(' ').unwrap_or(rest)
        }
        _ => line,
    }
}

/// The excerpt of a log's last bytes: cleaned lines, then the last `max_lines` of them within
/// `max_bytes` (cut at a line start where possible, at a character boundary always).
pub fn excerpt_log(check: &str, raw: &str, already_cut: bool) -> LogExcerpt {
    excerpt_with(
        check,
        raw,
        already_cut,
        LOG_EXCERPT_LINES,
        LOG_EXCERPT_BYTES,
    )
}

fn excerpt_with(
    check: &str,
    raw: &str,
    already_cut: bool,
    max_lines: usize,
    max_bytes: usize,
) -> LogExcerpt {
    let cleaned = strip_ansi(&raw.replace("\r\n", "\n"));
    let mut lines: Vec<&str> = cleaned
        .split('\n')
        // A download cut mid-line starts with a partial line: drop it.
        .skip(usize::from(already_cut))
        .map(strip_timestamp)
        .filter(|l| !l.starts_with("##[endgroup]"))
        .map(|l| l.strip_prefix("##[group]").unwrap_or(l))
        .collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let mut truncated = already_cut;
    if lines.len() > max_lines {
        lines.drain(..lines.len() - max_lines);
        truncated = true;
    }
    let mut text = lines.join("\n");
    while text.len() > max_bytes {
        truncated = true;
        let mut cut = text.len() - max_bytes;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        // Prefer starting at the next whole line.
        if let Some(newline) = text[cut..].find('\n')
            && newline + 1 < text.len() - cut
        {
            cut += newline + 1;
        }
        text.drain(..cut);
    }
    let lines = if text.is_empty() {
        0
    } else {
        text.lines().count()
    };
    if lines == 0 {
        return LogExcerpt::note(check, "the log is empty".into());
    }
    LogExcerpt {
        check: check.to_owned(),
        text,
        lines,
        truncated,
        note: None,
    }
}

impl GitHub {
    /// The excerpt of GitHub Actions job `job_id`'s log (`GET …/actions/jobs/{id}/logs`, which
    /// answers 302 to a plain-text download). A log that cannot be read (expired: 410, no
    /// permission: 403, gone: 404, or any other failure) gives a note instead.
    pub async fn job_log_excerpt(&self, repo: &RepoRef, check: &str, job_id: u64) -> LogExcerpt {
        let op = Op {
            repo,
            action: "download a job log",
            resource: Some(format!("the log of job {job_id}")),
        };
        let path = format!("{}/actions/jobs/{job_id}/logs", repo.api_path());
        match self.get_tail(&path, FETCH_TAIL_BYTES, &op).await {
            Ok((bytes, cut)) => excerpt_log(check, &String::from_utf8_lossy(&bytes), cut),
            Err(error) => {
                let why = match &error {
                    crate::ForgeError::Refused { status: 410, .. } => {
                        "the log has expired (410)".to_owned()
                    }
                    crate::ForgeError::Forbidden { .. } => {
                        "the token may not read Actions logs (403)".to_owned()
                    }
                    crate::ForgeError::NotFound { .. }
                    | crate::ForgeError::RepositoryNotFound { .. } => {
                        "no log was found (404)".to_owned()
                    }
                    other => format!("the log could not be read: {other}"),
                };
                LogExcerpt::note(check, why)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_timestamps_are_removed() {
        let raw = "\u{feff}2026-01-01T10:00:00.1234567Z ##[group]Run cargo test\n\
                   2026-01-01T10:00:01.0000000Z \u{1b}[31merror\u{1b}[0m: boom\u{1b}]0;title\u{7}\n\
                   2026-01-01T10:00:02.0000000Z ##[endgroup]\n\
                   no timestamp here\r\n";
        let excerpt = excerpt_log("build", raw, false);
        assert_eq!(
            excerpt.text,
            "Run cargo test\nerror: boom\nno timestamp here"
        );
        assert_eq!(excerpt.lines, 3);
        assert!(!excerpt.truncated);
    }

    #[test]
    fn excerpts_keep_the_last_lines_within_the_byte_bound() {
        let raw: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let by_lines = excerpt_with("t", &raw, false, 60, 8 * 1024);
        assert_eq!(by_lines.lines, 60);
        assert!(by_lines.text.starts_with("line 440\n") && by_lines.text.ends_with("line 499"));
        assert!(by_lines.truncated);
        let by_bytes = excerpt_with("t", &raw, false, 60, 100);
        assert!(by_bytes.text.len() <= 100, "{}", by_bytes.text);
        assert!(by_bytes.text.starts_with("line "), "{}", by_bytes.text);
        let wide = "é".repeat(100);
        let cut = excerpt_with("t", &wide, false, 60, 51);
        assert!(cut.text.len() <= 51 && cut.text.chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_cut_download_drops_its_partial_first_line() {
        let excerpt = excerpt_log("t", "tial line\nwhole line\n", true);
        assert_eq!(excerpt.text, "whole line");
        assert!(excerpt.truncated);
        assert!(
            excerpt
                .describe()
                .starts_with("log of t (last 1 lines):\n```text\n")
        );
    }
}
