//! A single-pass reader that builds the borrowed [`Json`] tree straight from the text for
//! documents serde_json would accept unchanged; anything unusual (a syntax error, a repeated
//! key, deep nesting, a lone surrogate, an unusual number) is left to serde_json, so errors and
//! edge cases keep serde's exact behaviour. `scan_split.rs` decides whether a document is read
//! by this reader alone or, when large, by two of them on two threads (with the same result).

use serde_json::Number;

use crate::handover::{Level, Pending};
use crate::tree::{Alloc, Json, JsonObject};

/// Nesting this reader handles itself; deeper documents go to serde_json, whose recursion limit
/// ([`crate::MAX_NESTING`]) then decides.
pub(crate) const SCAN_DEPTH: usize = 96;

/// Bytes that end a plain run inside a string: the quote, the backslash and control bytes.
static STOPS: [bool; 256] = {
    let mut stops = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        stops[b] = true;
        b += 1;
    }
    stops[b'"' as usize] = true;
    stops[b'\\' as usize] = true;
    stops
};

/// Keys compared by length and outer bytes before their text (duplicate detection).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Fingerprint(u64);

impl Fingerprint {
    fn of(key: &str) -> Self {
        let bytes = key.as_bytes();
        let outer = match bytes {
            [] => 0,
            [first, .., last] => u64::from(*first) << 8 | u64::from(*last),
            [only] => u64::from(*only),
        };
        Self((bytes.len() as u64) << 16 | outer)
    }
}

pub(crate) struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pub(crate) pos: usize,
    arena: Alloc<'a>,
    /// Members of the objects being read, innermost last (one shared stack; a finished object
    /// moves its members into the arena).
    members: Vec<(&'a str, Json<'a>)>,
    fingerprints: Vec<Fingerprint>,
    /// Items of the arrays being read, innermost last.
    items: Vec<Json<'a>>,
    /// Scratch for strings with escapes, copied into the arena once complete.
    unescaped: String,
    /// Containers nested deeper than this are left to serde_json ([`SCAN_DEPTH`] on the main
    /// reader; a second thread, which does not know its absolute depth yet, counts from an
    /// offset).
    pub(crate) limit: usize,
    /// The deepest container entered so far.
    pub(crate) deepest: usize,
    /// Where a second thread reads the rest of the document from, and its answer.
    pub(crate) split: Option<Pending<'a>>,
    /// The second thread's containers still to close, innermost first, once it was joined.
    pub(crate) spliced: Option<std::vec::IntoIter<Level<'a>>>,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(text: &'a str, arena: Alloc<'a>) -> Self {
        Scanner {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            arena,
            members: Vec::new(),
            fingerprints: Vec::new(),
            items: Vec::new(),
            unescaped: String::new(),
            limit: SCAN_DEPTH,
            deepest: 0,
            split: None,
            spliced: None,
        }
    }

    /// The whole text as one value followed by nothing but whitespace.
    pub(crate) fn document(&mut self) -> Option<Json<'a>> {
        let value = self.value(0)?;
        self.skip_ws();
        (self.pos == self.bytes.len()).then_some(value)
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.bytes.len()
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub(crate) fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &[u8], value: Json<'a>) -> Option<Json<'a>> {
        let end = self.pos + word.len();
        (self.bytes.get(self.pos..end)? == word).then(|| {
            self.pos = end;
            value
        })
    }

    pub(crate) fn value(&mut self, depth: usize) -> Option<Json<'a>> {
        self.skip_ws();
        match self.peek()? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(Json::String),
            b'n' => self.literal(b"null", Json::Null),
            b't' => self.literal(b"true", Json::Bool(true)),
            b'f' => self.literal(b"false", Json::Bool(false)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// Enters a container at `depth`, unless that is deeper than this reader goes.
    fn enter(&mut self, depth: usize) -> Option<()> {
        if depth > self.limit {
            return None;
        }
        self.deepest = self.deepest.max(depth);
        Some(())
    }

    /// Appends a member to the object whose members start at `base`; `None` for a repeated
    /// key (serde_json reports it).
    pub(crate) fn push_member(&mut self, base: usize, key: &'a str, value: Json<'a>) -> Option<()> {
        let print = Fingerprint::of(key);
        let earlier = &self.fingerprints[base..];
        if earlier.contains(&print)
            && self.members[base..]
                .iter()
                .zip(earlier)
                .any(|((k, _), p)| *p == print && *k == key)
        {
            return None;
        }
        self.members.push((key, value));
        self.fingerprints.push(print);
        Some(())
    }

    /// A key and its colon, from the key's opening quote.
    pub(crate) fn key(&mut self) -> Option<&'a str> {
        if self.peek()? != b'"' {
            return None;
        }
        let key = self.string()?;
        self.skip_ws();
        if self.peek()? != b':' {
            return None;
        }
        self.pos += 1;
        Some(key)
    }

    fn object(&mut self, depth: usize) -> Option<Json<'a>> {
        self.enter(depth)?;
        self.pos += 1;
        let base = self.members.len();
        self.skip_ws();
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(Json::Object(JsonObject::default()));
        }
        loop {
            self.skip_ws();
            let key = self.key()?;
            let value = self.value(depth)?;
            self.push_member(base, key, value)?;
            if self.spliced.is_some() {
                // The rest of this object was read by the second thread.
                return self.finish_spliced_object(base);
            }
            self.skip_ws();
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => break,
                _ => return None,
            }
        }
        self.pos += 1;
        Some(self.finish_object(base))
    }

    pub(crate) fn finish_object(&mut self, base: usize) -> Json<'a> {
        self.fingerprints.truncate(base);
        let members = self.arena.slice(self.members.drain(base..));
        Json::Object(JsonObject::from_members(members))
    }

    pub(crate) fn members_base(&self) -> usize {
        self.members.len()
    }

    /// The members pushed since `base`, taken off the stack.
    pub(crate) fn take_members(&mut self, base: usize) -> Vec<(&'a str, Json<'a>)> {
        self.fingerprints.truncate(base);
        self.members.split_off(base)
    }

    pub(crate) fn push_item(&mut self, item: Json<'a>) {
        self.items.push(item);
    }

    fn array(&mut self, depth: usize) -> Option<Json<'a>> {
        self.enter(depth)?;
        self.pos += 1;
        let base = self.items.len();
        self.skip_ws();
        if self.peek()? == b']' {
            self.pos += 1;
            return Some(Json::Array(&[]));
        }
        loop {
            let item = self.value(depth)?;
            self.items.push(item);
            if self.spliced.is_some() {
                // The rest of this array was read by the second thread.
                return self.finish_spliced_array(base);
            }
            self.skip_ws();
            match self.peek()? {
                b',' => {
                    self.pos += 1;
                    if self.split.is_some() && self.splice_here(depth) {
                        // The second thread read this array's remaining items.
                        return Some(self.finish_array(base));
                    }
                }
                b']' => break,
                _ => return None,
            }
        }
        self.pos += 1;
        Some(self.finish_array(base))
    }

    pub(crate) fn finish_array(&mut self, base: usize) -> Json<'a> {
        Json::Array(self.arena.slice(self.items.drain(base..)))
    }

    /// Bytes up to the next quote, backslash or control byte (where a string's plain run ends).
    fn plain_run(&self) -> usize {
        self.bytes[self.pos..]
            .iter()
            .position(|&b| STOPS[usize::from(b)])
            .unwrap_or(self.bytes.len() - self.pos)
    }

    /// A string starting at the opening quote: borrowed when it has no escapes.
    #[inline]
    pub(crate) fn string(&mut self) -> Option<&'a str> {
        let start = self.pos + 1;
        let run = self
            .bytes
            .get(start..)?
            .iter()
            .position(|&b| STOPS[usize::from(b)])?;
        let end = start + run;
        if self.bytes[end] == b'"' {
            self.pos = end + 1;
            return self.text.get(start..end);
        }
        self.pos = end;
        self.escaped_string(start)
    }

    /// A string whose plain run from `start` ended at something other than its closing quote.
    #[cold]
    fn escaped_string(&mut self, start: usize) -> Option<&'a str> {
        if self.bytes[self.pos] != b'\\' {
            return None; // a control byte
        }
        let mut owned = std::mem::take(&mut self.unescaped);
        owned.clear();
        owned.push_str(self.text.get(start..self.pos)?);
        let text = self.unescaped_rest(&mut owned);
        self.unescaped = owned;
        text
    }

    /// The rest of a string with escapes, from its first backslash, appended to `owned`.
    fn unescaped_rest(&mut self, owned: &mut String) -> Option<&'a str> {
        loop {
            match *self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(self.arena.str(owned));
                }
                b'\\' => {
                    self.pos += 1;
                    let escaped = self.escape()?;
                    owned.push(escaped);
                }
                0..=0x1f => return None,
                _ => {
                    let run = self.pos;
                    self.pos += self.plain_run();
                    owned.push_str(self.text.get(run..self.pos)?);
                }
            }
        }
    }

    /// The character of an escape, the backslash already consumed.
    fn escape(&mut self) -> Option<char> {
        let byte = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                match unit {
                    0xD800..=0xDBFF => {
                        if self.bytes.get(self.pos..self.pos + 2)? != b"\\u" {
                            return None;
                        }
                        self.pos += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return None;
                        }
                        char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))?
                    }
                    _ => char::from_u32(unit)?, // lone trailing surrogates are `None`
                }
            }
            _ => return None,
        })
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes.get(self.pos..self.pos + 4)?;
        let mut unit = 0;
        for &d in digits {
            unit = unit * 16 + char::from(d).to_digit(16)?;
        }
        self.pos += 4;
        Some(unit)
    }

    /// Plain non-negative integers are read here; every other number by serde_json itself from
    /// its exact text, so values match what serde_json would produce.
    fn number(&mut self) -> Option<Json<'a>> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let digits = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        let int_end = self.pos;
        if int_end == digits || (self.bytes[digits] == b'0' && int_end - digits > 1) {
            return None;
        }
        let mut plain = start == digits;
        if self.peek() == Some(b'.') {
            plain = false;
            self.pos += 1;
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            plain = false;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.digits()?;
        }
        let literal = self.text.get(start..self.pos)?;
        if plain && literal.len() <= 18 {
            return literal.parse::<u64>().ok().map(|n| Json::Number(n.into()));
        }
        serde_json::from_str::<Number>(literal)
            .ok()
            .map(Json::Number)
    }

    /// One or more decimal digits.
    fn digits(&mut self) -> Option<()> {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        (self.pos > start).then_some(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde::de::DeserializeSeed;

    use crate::scan_split::scan;
    use crate::tree::Arena;

    fn serde_tree<'a>(text: &'a str, arena: Alloc<'a>) -> Option<Json<'a>> {
        let mut d = serde_json::Deserializer::from_str(text);
        crate::tree::TreeSeed(arena)
            .deserialize(&mut d)
            .and_then(|v| d.end().map(|()| v))
            .ok()
    }

    fn accepts(text: &str) -> bool {
        let mut arena = Arena::new();
        let (first, second) = arena.halves();
        scan(text, first, second).is_some()
    }

    /// Whatever the scanner accepts, serde_json accepts with the same tree.
    fn agrees(text: &str) -> bool {
        let mut arena = Arena::new();
        let (first, second) = arena.halves();
        match scan(text, first, second) {
            Some(tree) => serde_tree(text, first).as_ref() == Some(&tree),
            None => true,
        }
    }

    #[test]
    fn accepted_documents_match_serde() {
        for text in [
            r#"{"a":[1,-2,3.5,1e3,-0,0,18446744073709551615,18446744073709551616],"b":null}"#,
            r#" { "k" : "x\"y\\z\/\b\f\n\r\t\u00e9\ud83d\ude00" , "e":{}, "l":[] } "#,
            r#"[true,false,null,"",{"a":{"b":[[]]}}]"#,
            "12345678901234567890123",
            "-9223372036854775808",
            "1E-400",
        ] {
            assert!(accepts(text), "{text}");
            assert!(agrees(text), "{text}");
        }
    }

    #[test]
    fn unusual_or_invalid_documents_are_left_to_serde() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,}"#,
            "[1,]",
            "01",
            "1.",
            "-",
            "1e",
            "nul",
            "[1] x",
            "\"\u{1}\"",
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\q""#,
            "1e400",
            "{1:2}",
            "\u{feff}{}",
        ] {
            assert!(!accepts(text), "{text}");
        }
        let deep = format!(
            "{}{}",
            "[".repeat(SCAN_DEPTH + 1),
            "]".repeat(SCAN_DEPTH + 1)
        );
        assert!(!accepts(&deep));
        let fine = format!("{}{}", "[".repeat(SCAN_DEPTH), "]".repeat(SCAN_DEPTH));
        assert!(agrees(&fine) && accepts(&fine));
    }

    /// Random token soups (mostly invalid) and random valid documents: whenever the scanner
    /// accepts, serde_json accepts the same tree, and valid documents are accepted.
    #[test]
    fn random_documents_agree_with_serde() {
        const TOKENS: [&str; 24] = [
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            " ",
            "\"a\"",
            "\"b\"",
            "\"\\u00e9\"",
            "\"\\ud83d\\ude00\"",
            "\"\\ud800\"",
            "\"x\\ny\"",
            "1",
            "-0",
            "01",
            "1.5e3",
            "-",
            "null",
            "true",
            "tru",
            "\t",
            "1e999",
            "\"\u{7f}\u{e9}\"",
        ];
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..20_000 {
            let len = 1 + next(12);
            let text: String = (0..len).map(|_| TOKENS[next(TOKENS.len())]).collect();
            assert!(agrees(&text), "{text}");
        }
        for _ in 0..2_000 {
            let value = random_value(&mut next, 0);
            let text = serde_json::to_string_pretty(&value).unwrap_or_default();
            assert!(accepts(&text) && agrees(&text), "{text}");
        }
    }

    pub(crate) fn random_value(
        next: &mut impl FnMut(usize) -> usize,
        depth: usize,
    ) -> serde_json::Value {
        use serde_json::{Value, json};
        let strings = [
            "",
            "k",
            "kind",
            "a\"b",
            "tab\there",
            "é",
            "\u{1F600}",
            "\u{0}",
        ];
        match next(if depth > 4 { 5 } else { 7 }) {
            0 => Value::Null,
            1 => Value::Bool(next(2) == 0),
            2 => json!(next(1_000_000) as i64 - 500_000),
            3 => json!(next(1000) as f64 / 7.0),
            4 => json!(strings[next(strings.len())]),
            5 => Value::Array(
                (0..next(4))
                    .map(|_| random_value(next, depth + 1))
                    .collect(),
            ),
            _ => Value::Object(
                (0..next(5))
                    .map(|i| {
                        (
                            format!("{}{i}", strings[next(strings.len())]),
                            random_value(next, depth + 1),
                        )
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn keys_sharing_a_prefix_are_distinct() {
        let text = r#"{"abcdefghX":1,"abcdefghY":2,"abcdefgh":3}"#;
        assert!(accepts(text));
        assert!(!accepts(r#"{"abcdefghX":1,"abcdefghX":2}"#));
    }
}
