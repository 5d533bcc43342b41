//! Secret masking on raw bytes: whole texts, and streams read in arbitrary chunks where a
//! secret may straddle two reads, contain line breaks or cross a later line cut.

use std::fmt;
use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};

use crate::shapes::shapes;

/// What a masked secret value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Shortest value worth masking: shorter ones would mask ordinary text.
pub const MIN_SECRET_BYTES: usize = 4;

/// Replaces secret values with [`REDACTED`]. `Debug` shows how many values it knows, never
/// the values.
#[derive(Clone, Default)]
pub struct Redactor {
    needles: Arc<[Vec<u8>]>,
    matcher: Option<Arc<AhoCorasick>>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("values", &self.needles.len())
            .finish()
    }
}

impl Redactor {
    /// A redactor for `values` in every shape they can be printed in (raw, JSON- and
    /// otherwise escaped, percent-encoded, base64, each long line of a multi-line value:
    /// `shapes.rs`); values shorter than [`MIN_SECRET_BYTES`] are ignored.
    pub fn new<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut needles: Vec<Vec<u8>> = values
            .into_iter()
            .filter(|v| v.as_ref().len() >= MIN_SECRET_BYTES)
            .flat_map(|v| shapes(v.as_ref(), MIN_SECRET_BYTES))
            .map(String::into_bytes)
            .collect();
        // Most executions have no secret to mask: building even an empty automaton is work
        // every step paid for nothing.
        if needles.is_empty() {
            return Self::default();
        }
        needles.sort();
        needles.dedup();
        // Leftmost-longest: a value that contains another is masked whole.
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&needles)
            .ok()
            .map(Arc::new);
        Self {
            needles: needles.into(),
            matcher,
        }
    }

    /// True when there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// `text` with every secret value masked.
    pub fn apply(&self, text: &str) -> String {
        match &self.matcher {
            Some(matcher) if matcher.is_match(text) => {
                let replacements = vec![REDACTED; self.needles.len()];
                matcher.replace_all(text, &replacements)
            }
            _ => text.to_owned(),
        }
    }

    /// `bytes` with every secret value masked.
    pub fn apply_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        self.mask_into(bytes, &mut out);
        out
    }

    /// A masker for one byte stream.
    pub fn stream(&self) -> StreamRedactor {
        StreamRedactor {
            redactor: self.clone(),
            held: Vec::new(),
        }
    }

    fn mask_into(&self, bytes: &[u8], out: &mut Vec<u8>) {
        let Some(matcher) = &self.matcher else {
            out.extend_from_slice(bytes);
            return;
        };
        let mut last = 0;
        for found in matcher.find_iter(bytes) {
            out.extend_from_slice(&bytes[last..found.start()]);
            out.extend_from_slice(REDACTED.as_bytes());
            last = found.end();
        }
        out.extend_from_slice(&bytes[last..]);
    }

    /// The length of the longest tail of `bytes` that is a proper beginning of a value: those
    /// bytes may still become a secret when the next chunk arrives.
    fn partial_tail(&self, bytes: &[u8]) -> usize {
        let Some(&last) = bytes.last() else {
            return 0;
        };
        self.needles
            .iter()
            .filter_map(|needle| {
                let longest = (needle.len() - 1).min(bytes.len());
                // Comparing the last byte first keeps this near-linear in the needle: every
                // secret has a dozen shapes, and this runs on every chunk a child writes.
                (1..=longest)
                    .rev()
                    .find(|&k| needle[k - 1] == last && bytes.ends_with(&needle[..k]))
            })
            .max()
            .unwrap_or(0)
    }
}

/// Masks secrets in a stream fed chunk by chunk. A tail that may begin a secret is held back
/// until the next chunk (or [`StreamRedactor::finish`]) decides it, so no secret escapes by
/// being split across reads.
#[derive(Debug)]
pub struct StreamRedactor {
    redactor: Redactor,
    held: Vec<u8>,
}

impl StreamRedactor {
    /// Appends to `out` every byte of `chunk` (and of what was held) that is decided.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let Some(matcher) = self.redactor.matcher.clone() else {
            out.extend_from_slice(chunk);
            return;
        };
        self.held.extend_from_slice(chunk);
        let buffer = &self.held;
        let undecided_from = buffer.len() - self.redactor.partial_tail(buffer);
        let mut last = 0;
        for found in matcher.find_iter(buffer.as_slice()) {
            if found.start() >= undecided_from {
                break;
            }
            out.extend_from_slice(&buffer[last..found.start()]);
            out.extend_from_slice(REDACTED.as_bytes());
            last = found.end();
        }
        let decided = undecided_from.max(last);
        out.extend_from_slice(&buffer[last..decided]);
        self.held.drain(..decided);
    }

    /// Appends whatever is still held, masked: the stream has ended.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let held = std::mem::take(&mut self.held);
        self.redactor.mask_into(&held, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn streamed(redactor: &Redactor, input: &[u8], cuts: &[usize]) -> Vec<u8> {
        let mut stream = redactor.stream();
        let mut out = Vec::new();
        let mut from = 0;
        for &cut in cuts {
            let cut = cut.clamp(from, input.len());
            stream.feed(&input[from..cut], &mut out);
            from = cut;
        }
        stream.feed(&input[from..], &mut out);
        stream.finish(&mut out);
        out
    }

    #[test]
    fn values_are_masked_longest_first_and_never_debug_printed() {
        let r = Redactor::new(["canary-123", "canary-123-long", "abc"]);
        assert_eq!(
            r.apply("x canary-123-long y canary-123 abc"),
            "x [REDACTED] y [REDACTED] abc"
        );
        assert!(!format!("{r:?}").contains("canary"));
    }

    #[test]
    fn without_values_worth_masking_everything_passes_unchanged() {
        for redactor in [
            Redactor::new(Vec::<String>::new()),
            Redactor::new(["abc", ""]),
        ] {
            assert!(redactor.is_empty());
            assert_eq!(redactor.apply("abc token"), "abc token");
            assert_eq!(streamed(&redactor, b"abc\ntoken", &[2]), b"abc\ntoken");
        }
        assert!(!Redactor::new(["abcd"]).is_empty());
    }

    #[test]
    fn a_secret_split_across_reads_and_lines_is_masked() {
        let secret = "first line\nsecond ✓ line";
        let r = Redactor::new([secret]);
        let input = format!("before {secret} after\n");
        for cut in 0..input.len() {
            let out = streamed(&r, input.as_bytes(), &[cut]);
            assert_eq!(out, b"before [REDACTED] after\n", "cut at {cut}");
        }
    }

    #[test]
    fn escaped_and_encoded_shapes_of_a_value_are_masked() {
        let secret = "A-x\nB-\"y\"\\é";
        let r = Redactor::new([secret]);
        let printed_as_json = serde_json::json!({ "k": secret }).to_string();
        assert_eq!(r.apply(&printed_as_json), "{\"k\":\"[REDACTED]\"}");
        let python_ascii = "{\"k\": \"A-x\\nB-\\\"y\\\"\\\\\\u00e9\"}";
        assert_eq!(r.apply(python_ascii), "{\"k\": \"[REDACTED]\"}");
        assert_eq!(r.apply(&format!("{secret:?}")), "\"[REDACTED]\"");
        let streamed_json = streamed(&r, printed_as_json.as_bytes(), &[9, 13]);
        assert_eq!(streamed_json, b"{\"k\":\"[REDACTED]\"}");
    }

    #[test]
    fn a_held_tail_that_is_no_secret_is_released() {
        let r = Redactor::new(["secret-value"]);
        let mut stream = r.stream();
        let mut out = Vec::new();
        stream.feed(b"line one\nsecret-", &mut out);
        assert_eq!(out, b"line one\n");
        stream.feed(b"ary\n", &mut out);
        assert_eq!(out, b"line one\nsecret-ary\n");
    }

    proptest! {
        #[test]
        fn streaming_equals_masking_the_whole(
            pieces in proptest::collection::vec(prop_oneof![
                Just("tok€n-1".to_owned()), Just("tok€n-1-longer".to_owned()),
                Just("x\ny".to_owned()), "[a-z€\n ]{0,6}",
            ], 0..12),
            cuts in proptest::collection::vec(0usize..80, 0..6),
        ) {
            let r = Redactor::new(["tok€n-1", "tok€n-1-longer", "\nyes\n"]);
            let input = pieces.concat();
            let mut cuts = cuts;
            cuts.sort_unstable();
            prop_assert_eq!(streamed(&r, input.as_bytes(), &cuts), r.apply_bytes(input.as_bytes()));
        }
    }
}
