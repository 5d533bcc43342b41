//! The shapes one secret value can take on its way out of a worker: raw, JSON-escaped (as
//! serde, Python's `json.dumps` and JavaScript write it), Python `repr`, Rust `Debug`, the
//! escaping Trellis applies to log lines, percent-encoding, base64 at every alignment, and each
//! long line of a multi-line value. The redactor masks every one of them.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Shortest base64 run or line fragment worth masking: shorter ones match ordinary text.
const MIN_DERIVED_BYTES: usize = 8;

/// Every shape of `value` worth masking, the raw value first; no repeats.
pub(crate) fn shapes(value: &str, min_bytes: usize) -> Vec<String> {
    let mut out = Vec::new();
    push_escapes(value, &mut out);
    push_base64(value, &mut out);
    if value.contains(['\n', '\r']) {
        for line in value.lines().map(str::trim) {
            if line.len() >= MIN_DERIVED_BYTES.max(min_bytes) {
                push_escapes(line, &mut out);
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|shape| shape.len() >= min_bytes && seen.insert(shape.clone()));
    out
}

fn push_escapes(value: &str, out: &mut Vec<String>) {
    out.push(value.to_owned());
    out.push(json_escaped(value, false, false));
    out.push(json_escaped(value, true, false));
    out.push(json_escaped(value, true, true));
    out.push(python_repr_body(value));
    out.push(value.escape_debug().to_string());
    out.push(trellis_log_escaped(value));
    out.push(percent_encoded(value, false));
    out.push(percent_encoded(value, true));
}

/// A JSON string's body: `ascii` escapes every non-ASCII character as `\uXXXX` (UTF-16, as
/// Python's `json.dumps` does by default), `upper` writes those digits in upper case.
fn json_escaped(value: &str, ascii: bool, upper: bool) -> String {
    let mut out = String::with_capacity(value.len() + 8);
    let unicode = |out: &mut String, unit: u16| {
        let _ = if upper {
            write!(out, "\\u{unit:04X}")
        } else {
            write!(out, "\\u{unit:04x}")
        };
    };
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => unicode(&mut out, c as u16),
            c if ascii && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    unicode(&mut out, *unit);
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The body of Python's `repr()` of a str in single quotes.
fn python_repr_body(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// What `trellis_run_model::sanitize_log_message` makes of the value.
fn trellis_log_escaped(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control()
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// URL percent-encoding of every byte outside RFC 3986's unreserved set.
fn percent_encoded(value: &str, upper: bool) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else if upper {
            let _ = write!(out, "%{byte:02X}");
        } else {
            let _ = write!(out, "%{byte:02x}");
        }
    }
    out
}

/// The base64 characters that depend only on the value, whatever precedes it: the value is
/// encoded after 0, 1 and 2 bytes of padding and the characters touched by the padding or by
/// what may follow are dropped (a token inside `Authorization: Basic …` is found this way).
fn push_base64(value: &str, out: &mut Vec<String>) {
    let bytes = value.as_bytes();
    for offset in 0..3usize {
        let mut padded = vec![0u8; offset];
        padded.extend_from_slice(bytes);
        let encoded = STANDARD.encode(&padded);
        // Characters covering the padding bytes (and the one they share) are not the value's.
        let start = (offset * 4).div_ceil(3);
        // Only whole groups of three value bytes give characters independent of what follows.
        let stable_bytes = (padded.len() / 3) * 3;
        let end = (stable_bytes * 4) / 3;
        if end > start && end - start >= MIN_DERIVED_BYTES {
            out.push(encoded[start..end].to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shapes_match_what_encoders_write() {
        let value = "A-x\n\"B\"\\é😀";
        let all = shapes(value, 4);
        for expected in [
            "A-x\\n\\\"B\\\"\\\\é😀",
            "A-x\\n\\\"B\\\"\\\\\\u00e9\\ud83d\\ude00",
            "A-x\\n\\\"B\\\"\\\\\\u00E9\\uD83D\\uDE00",
        ] {
            assert!(all.iter().any(|s| s == expected), "{expected} in {all:?}");
        }
    }

    #[test]
    fn base64_is_found_at_every_alignment() {
        let secret = "s3cr3t-t0ken-value";
        let all = shapes(secret, 4);
        for prefix in ["", "u", "us", "user:"] {
            let encoded = STANDARD.encode(format!("{prefix}{secret}!"));
            assert!(
                all.iter().any(|shape| encoded.contains(shape.as_str())
                    && shape.len() >= MIN_DERIVED_BYTES
                    && !shape.contains('-')),
                "no base64 shape of the secret inside {encoded}"
            );
        }
    }

    #[test]
    fn long_lines_of_a_multi_line_value_are_shapes_and_short_ones_are_not() {
        let all = shapes("-----BEGIN KEY-----\nMIIEowIBAAKCAQEA\n}\n", 4);
        assert!(all.iter().any(|s| s == "MIIEowIBAAKCAQEA"));
        assert!(!all.iter().any(|s| s == "}"));
    }
}
