//! Reads a document with the scanner, and a large one on two threads: a second thread reads
//! from an array item in the middle of the text to the end, and the calling thread, reading
//! from the start, takes its result over when it reaches that item, so each thread reads about
//! half of the text.
//!
//! The second thread starts at a guess (an opening brace after a comma), without knowing how
//! deep it is or which containers enclose it: it reads the rest of that array, then whatever
//! follows each closing bracket up to the end of the text, recording every container it
//! closes. Its result is used only if the calling thread arrives at exactly that item inside
//! an array and the recorded containers are exactly the ones the calling thread has open
//! (count, kinds, nesting limit, no repeated keys across the two parts); otherwise the calling
//! thread reads on by itself. Either way the tree, and the `None` for anything serde_json must
//! decide, are those of reading on one thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;

use crate::handover::{Entries, Level, Pending, Rest};
use crate::scan::{SCAN_DEPTH, Scanner};
use crate::tree::{Alloc, Json};

/// Documents shorter than this are read on one thread: starting a thread costs tens of
/// microseconds, about what reading 30 kB costs, and every reference template is shorter.
const SPLIT_MIN_BYTES: usize = 256 * 1024;

/// How far past the middle a split point is looked for before giving up.
const SEARCH_BYTES: usize = 64 * 1024;

/// The second thread's container depths count down from here (it cannot know its absolute
/// depth); more enclosing containers than this means the calling thread would refuse anyway.
const HELPER_BASE: usize = SCAN_DEPTH;

/// Stack of the second thread, as large as a main thread's.
const HELPER_STACK_BYTES: usize = 8 << 20;

/// Reads `text` as one JSON value, or `None` when serde_json must decide (including every
/// invalid document). Large documents are read by two threads (see the module documentation);
/// `second` is the arena half the other thread fills.
pub(crate) fn scan<'a>(
    text: &'a str,
    arena: Alloc<'a>,
    second: &'a mut bumpalo::Bump,
) -> Option<Json<'a>> {
    match split_point(text).filter(|_| crate::parallel::second_core()) {
        Some(at) => scan_in_two(text, arena, second, at),
        None => Scanner::new(text, arena).document(),
    }
}

/// Where a second thread should start: the first opening brace after the middle of a large
/// document that follows a comma. Outside a string that is always an item of an array.
pub(crate) fn split_point(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    if bytes.len() < SPLIT_MIN_BYTES {
        return None;
    }
    let middle = bytes.len() / 2;
    let mut from = middle;
    while from < middle + SEARCH_BYTES {
        let at = from + bytes.get(from..)?.iter().position(|&b| b == b'{')?;
        let before = bytes[..at]
            .iter()
            .rev()
            .find(|b| !matches!(b, b' ' | b'\n' | b'\t' | b'\r'));
        if before == Some(&b',') {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Reads `text` with a second thread starting at `at` (see the module documentation).
pub(crate) fn scan_in_two<'a>(
    text: &'a str,
    arena: Alloc<'a>,
    second: &'a mut bumpalo::Bump,
    at: usize,
) -> Option<Json<'a>> {
    scan_in_two_reporting(text, arena, second, at).0
}

/// [`scan_in_two`], also telling whether the second thread's result was used.
fn scan_in_two_reporting<'a>(
    text: &'a str,
    arena: Alloc<'a>,
    second: &'a mut bumpalo::Bump,
    at: usize,
) -> (Option<Json<'a>>, bool) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (send, answer) = sync_channel(1);
        let stop = &stop;
        let helper = std::thread::Builder::new()
            .stack_size(HELPER_STACK_BYTES)
            .spawn_scoped(scope, move || {
                let second: &'a bumpalo::Bump = second;
                // The receiver is gone when the calling thread finished without the answer.
                let _ = send.send(read_rest(text, Alloc(second), at, stop));
            });
        let mut scanner = Scanner::new(text, arena);
        // Without a second thread the calling thread reads everything itself.
        scanner.split = helper.is_ok().then_some(Pending { at, answer });
        let tree = scanner.document();
        // A second thread still reading is of no use any more.
        stop.store(true, Ordering::Relaxed);
        (tree, scanner.spliced.is_some())
    })
}

/// The second thread: the rest of the array item at `at` is in, then every enclosing
/// container up to the end of the text; `None` when that is not a valid continuation.
fn read_rest<'a>(
    text: &'a str,
    arena: Alloc<'a>,
    at: usize,
    stop: &AtomicBool,
) -> Option<Rest<'a>> {
    let mut s = Scanner::new(text, arena);
    s.limit = HELPER_BASE + SCAN_DEPTH;
    s.deepest = HELPER_BASE;
    s.pos = at;
    let mut depth = HELPER_BASE;
    let mut items = Vec::new();
    rest_of_array(&mut s, depth, &mut items, stop)?;
    let mut levels = vec![Level {
        entries: Entries::Items(items),
        end: s.pos,
    }];
    loop {
        s.skip_ws();
        if s.at_end() {
            return Some(Rest {
                levels,
                deepest: s.deepest,
            });
        }
        if levels.len() >= HELPER_BASE {
            return None;
        }
        depth -= 1;
        // What follows a closing bracket tells the kind of the enclosing container.
        let entries = match s.peek()? {
            b']' => {
                s.pos += 1;
                Entries::Items(Vec::new())
            }
            b'}' => {
                s.pos += 1;
                Entries::Members(Vec::new())
            }
            b',' => {
                s.pos += 1;
                s.skip_ws();
                next_entries(&mut s, depth, stop)?
            }
            _ => return None,
        };
        levels.push(Level {
            entries,
            end: s.pos,
        });
    }
}

/// The entries of a container of unknown kind after a comma: members when the next string is
/// followed by a colon, items otherwise.
fn next_entries<'a>(s: &mut Scanner<'a>, depth: usize, stop: &AtomicBool) -> Option<Entries<'a>> {
    let mut items = Vec::new();
    if s.peek()? != b'"' {
        rest_of_array(s, depth, &mut items, stop)?;
        return Some(Entries::Items(items));
    }
    let first = s.string()?;
    s.skip_ws();
    if s.peek()? == b':' {
        s.pos += 1;
        let base = s.members_base();
        let value = s.value(depth)?;
        s.push_member(base, first, value)?;
        if after_entry(s, b'}')? {
            rest_of_object(s, depth, base, stop)?;
        }
        return Some(Entries::Members(s.take_members(base)));
    }
    items.push(Json::String(first));
    if after_entry(s, b']')? {
        rest_of_array(s, depth, &mut items, stop)?;
    }
    Some(Entries::Items(items))
}

/// After an entry: `Some(true)` past a comma, `Some(false)` past the closing `close`.
fn after_entry(s: &mut Scanner<'_>, close: u8) -> Option<bool> {
    s.skip_ws();
    let next = s.peek()?;
    s.pos += 1;
    match next {
        b',' => Some(true),
        b if b == close => Some(false),
        _ => None,
    }
}

/// Items up to and past the closing bracket, the next one starting at the current position.
fn rest_of_array<'a>(
    s: &mut Scanner<'a>,
    depth: usize,
    items: &mut Vec<Json<'a>>,
    stop: &AtomicBool,
) -> Option<()> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        items.push(s.value(depth)?);
        if !after_entry(s, b']')? {
            return Some(());
        }
    }
}

/// Members up to and past the closing brace, the next key starting at the current position.
fn rest_of_object(s: &mut Scanner<'_>, depth: usize, base: usize, stop: &AtomicBool) -> Option<()> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        s.skip_ws();
        let key = s.key()?;
        let value = s.value(depth)?;
        s.push_member(base, key, value)?;
        if !after_entry(s, b'}')? {
            return Some(());
        }
    }
}

impl<'a> Scanner<'a> {
    /// At the split point, the second thread's answer: when it fits the containers open here
    /// (the array being read is at `depth`), its items finish that array and the rest is kept
    /// for the enclosing containers. `false`: read on here.
    pub(crate) fn splice_here(&mut self, depth: usize) -> bool {
        self.skip_ws();
        if self.split.as_ref().is_none_or(|p| p.at != self.pos) {
            return false;
        }
        let Some(Ok(Some(rest))) = self.split.take().map(|p| p.answer.recv()) else {
            return false;
        };
        // Its nesting, counted from HELPER_BASE at this array, must stay within this reader's.
        if rest.levels.len() != depth || rest.deepest + depth > SCAN_DEPTH + HELPER_BASE {
            return false;
        }
        let mut levels = rest.levels.into_iter();
        let Some(Level {
            entries: Entries::Items(items),
            end,
        }) = levels.next()
        else {
            return false;
        };
        for item in items {
            self.push_item(item);
        }
        self.pos = end;
        self.spliced = Some(levels);
        true
    }

    /// Finishes the array starting at `base` with the second thread's next container; `None`
    /// when that was not an array (the text is then not valid JSON).
    pub(crate) fn finish_spliced_array(&mut self, base: usize) -> Option<Json<'a>> {
        let Level {
            entries: Entries::Items(items),
            end,
        } = self.spliced.as_mut()?.next()?
        else {
            return None;
        };
        for item in items {
            self.push_item(item);
        }
        self.pos = end;
        Some(self.finish_array(base))
    }

    /// Finishes the object starting at `base` with the second thread's next container; `None`
    /// when that was not an object or repeats a key read here.
    pub(crate) fn finish_spliced_object(&mut self, base: usize) -> Option<Json<'a>> {
        let Level {
            entries: Entries::Members(members),
            end,
        } = self.spliced.as_mut()?.next()?
        else {
            return None;
        };
        for (key, value) in members {
            self.push_member(base, key, value)?;
        }
        self.pos = end;
        Some(self.finish_object(base))
    }
}

#[cfg(test)]
mod tests {
    use super::{SPLIT_MIN_BYTES, scan_in_two_reporting, split_point};
    use crate::scan::{SCAN_DEPTH, Scanner};
    use crate::tree::{Arena, Json};

    /// Every opening brace of the text: the places a split could be tried (most of them not
    /// array items, some inside strings).
    fn braces(text: &str) -> Vec<usize> {
        (0..text.len())
            .filter(|i| text.as_bytes()[*i] == b'{')
            .collect()
    }

    /// Reading on two threads from `at` gives exactly the one-thread result; reports whether
    /// the second thread's part was used.
    fn same_as_one_thread(text: &str, at: usize) -> bool {
        let one = Arena::new();
        let alone = Scanner::new(text, one.alloc()).document();
        let mut two = Arena::new();
        let (first, second) = two.halves();
        let (tree, spliced) = scan_in_two_reporting(text, first, second, at);
        assert_eq!(tree, alone, "split at {at} of {text}");
        spliced
    }

    fn random_next() -> impl FnMut(usize) -> usize {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        }
    }

    /// Random documents, compact and pretty, split at every brace: the same tree (or `None`)
    /// as one thread, and the second thread's part is used at every array item.
    #[test]
    fn random_documents_split_anywhere_read_as_on_one_thread() {
        let mut next = random_next();
        let mut used = 0;
        for _ in 0..300 {
            let value = serde_json::json!([
                crate::scan::tests::random_value(&mut next, 0),
                {"k": [crate::scan::tests::random_value(&mut next, 0), {"a": 1}]},
                crate::scan::tests::random_value(&mut next, 0),
            ]);
            for text in [
                serde_json::to_string(&value).unwrap_or_default(),
                serde_json::to_string_pretty(&value).unwrap_or_default(),
            ] {
                for at in braces(&text) {
                    let item = text.as_bytes()[..at]
                        .iter()
                        .rev()
                        .find(|b| !b.is_ascii_whitespace())
                        == Some(&b',');
                    let spliced = same_as_one_thread(&text, at);
                    // Outside strings a brace after a comma is an array item: always taken.
                    used += usize::from(spliced);
                    assert!(spliced || !item || in_string(&text, at), "{at}: {text}");
                }
            }
        }
        assert!(used > 1000, "{used}");
    }

    /// Whether position `at` is inside a string (counting unescaped quotes before it).
    fn in_string(text: &str, at: usize) -> bool {
        let mut inside = false;
        let mut escaped = false;
        for &b in &text.as_bytes()[..at] {
            match b {
                _ if escaped => escaped = false,
                b'\\' if inside => escaped = true,
                b'"' => inside = !inside,
                _ => {}
            }
        }
        inside
    }

    /// Invalid or unusual documents split at every brace give one thread's `None` (or tree).
    #[test]
    fn invalid_documents_split_anywhere_read_as_on_one_thread() {
        for text in [
            r#"[{"a":1},{"a":2},{"a":3}]"#,
            r#"{"a":[{},{"b":1}],"a":2}"#,
            r#"{"a":[{},{"b":1}],"c":2,"c":3}"#,
            r#"{"a":[{},{"b":1}]"c":2}"#,
            r#"[[{},{"b":1}],"c":2]"#,
            r#"{"a":[{},{"b":1}],3}"#,
            r#"{"a":[{},{"b":1}]]"#,
            r#"[{},{"b":1}}"#,
            r#"[{},{"b":1}] x"#,
            r#"[{},{"b":1},]"#,
            r#"[{},{"b":"\ud800"}]"#,
            r#"{"s":"[{},{\"x\":1}]","t":[{},{}]}"#,
            r#"[{},{"b":1}]]"#,
            r#"[{},{"b":1}"#,
            r#"{"a":[{},{"b":1}],"a":2,"a":[{},{}]}"#,
        ] {
            for at in braces(text) {
                same_as_one_thread(text, at);
            }
        }
    }

    /// Nesting is checked across the split: the second thread cannot know how deep it is.
    #[test]
    fn nesting_limits_hold_across_the_split() {
        for extra in [0, 1] {
            for inner in [0, 2, SCAN_DEPTH - 3] {
                // The deepest container is at SCAN_DEPTH + extra.
                let outer = SCAN_DEPTH - 1 - inner + extra;
                let text = format!(
                    "{}{{}},{{\"a\":{}0{}}}{}",
                    "[".repeat(outer),
                    "[".repeat(inner),
                    "]".repeat(inner),
                    "]".repeat(outer)
                );
                let at = text.find(",{").map_or(0, |i| i + 1);
                let spliced = same_as_one_thread(&text, at);
                assert_eq!(spliced, extra == 0, "{outer} + {inner}");
            }
        }
    }

    /// Large documents get a split point at an array item past their middle; small ones none.
    #[test]
    fn split_points_are_items_past_the_middle_of_large_documents() {
        let item = r#"{"kind":"x","list":[{"a":1},{"b":2}]}"#;
        let items = vec![item; 2 * SPLIT_MIN_BYTES / item.len()];
        let text = format!("{{\"items\":[{}]}}", items.join(",\n  "));
        let at = split_point(&text).unwrap_or(0);
        assert!(at >= text.len() / 2 && at < text.len());
        assert!(same_as_one_thread(&text, at));
        assert_eq!(split_point(&text[..SPLIT_MIN_BYTES - 1]), None);
        let mut arena = Arena::new();
        let (first, second) = arena.halves();
        let tree = super::scan(&text, first, second);
        assert!(matches!(tree, Some(Json::Object(_))));
    }
}
