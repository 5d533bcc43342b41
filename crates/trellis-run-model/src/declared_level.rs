//! The level a log line declares itself (`ERROR: …`, `[warn] …`, `{"level":"info",…}`), so a
//! worker's lines are levelled by what it said rather than by the pipe it wrote them to.

use serde_json::Value;

use crate::log::LogLevel;

/// A level name as programs write it, if it is one.
fn level_named(word: &str) -> Option<LogLevel> {
    match word.to_ascii_lowercase().as_str() {
        "error" | "err" | "fatal" | "critical" | "crit" | "panic" | "emerg" | "alert" => {
            Some(LogLevel::Error)
        }
        "warn" | "warning" => Some(LogLevel::Warn),
        "info" | "notice" => Some(LogLevel::Info),
        "debug" | "trace" => Some(LogLevel::Debug),
        _ => None,
    }
}

/// The level `line` declares: a JSON object's `level` or `severity`, or a leading level word
/// (`ERROR:`, `[warn]`, `Warning -`, `INFO `). None when it declares none.
pub fn declared_level(line: &str) -> Option<LogLevel> {
    let text = line.trim_start();
    if text.starts_with('{') {
        let object: Value = serde_json::from_str(text).ok()?;
        return ["level", "severity", "lvl"].iter().find_map(|key| {
            object
                .get(*key)
                .and_then(Value::as_str)
                .and_then(level_named)
        });
    }
    let text = text.strip_prefix('[').unwrap_or(text);
    let end = text
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (word, rest) = text.split_at(end);
    // The word must stand as a label: followed by `:`, `]`, ` -`, or a space.
    let labelled = rest.starts_with([':', ']']) || rest.starts_with(" -") || rest.starts_with(' ');
    if !labelled || word.len() < 3 {
        return None;
    }
    // A capitalised sentence ("Error handling is …") is prose unless it ends in `:`/`]`.
    let shouting = word.chars().all(|c| c.is_ascii_uppercase());
    if !shouting && !rest.starts_with([':', ']']) {
        return None;
    }
    level_named(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_level_words_are_read() {
        assert_eq!(declared_level("ERROR: disk full"), Some(LogLevel::Error));
        assert_eq!(
            declared_level("error: could not compile"),
            Some(LogLevel::Error)
        );
        assert_eq!(declared_level("[warn] slow response"), Some(LogLevel::Warn));
        assert_eq!(
            declared_level("warning: unused variable"),
            Some(LogLevel::Warn)
        );
        assert_eq!(declared_level("INFO starting"), Some(LogLevel::Info));
        assert_eq!(declared_level("  DEBUG - cache hit"), Some(LogLevel::Debug));
    }

    #[test]
    fn json_lines_are_read_by_their_level_field() {
        assert_eq!(
            declared_level(r#"{"level":"error","msg":"boom"}"#),
            Some(LogLevel::Error)
        );
        assert_eq!(
            declared_level(r#"{"severity":"WARNING","message":"x"}"#),
            Some(LogLevel::Warn)
        );
        assert_eq!(declared_level(r#"{"msg":"no level"}"#), None);
    }

    #[test]
    fn prose_and_progress_declare_nothing() {
        assert_eq!(declared_level("Compiling trellis v0.1.0"), None);
        assert_eq!(declared_level("Error handling is covered by tests"), None);
        assert_eq!(declared_level("errors: 0"), None);
        assert_eq!(declared_level("Cloning into 'repo'..."), None);
        assert_eq!(declared_level(""), None);
    }
}
