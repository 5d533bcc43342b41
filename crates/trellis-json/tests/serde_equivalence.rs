//! `trellis_json::parse` against serde_json on generated documents: every document serde_json
//! reads gives the same tree (compact, pretty, with `\u` escapes, with odd whitespace, large
//! enough for the two-thread scan), and every refusal is serde_json's own, with its message
//! and position; a repeated object key, which `serde_json::Value` overwrites, is refused.

use std::fmt;

use proptest::prelude::*;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use trellis_json::{Arena, Json, JsonError, parse};

/// Cases per property; `TRELLIS_FUZZ_CASES` raises it (the test script sets it for CI).
fn cases(default: u32) -> u32 {
    std::env::var("TRELLIS_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
        .map_or(default, |n| n.max(default))
}

fn strings() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{0,6}",
        any::<String>(),
        prop::collection::vec(
            prop_oneof![
                Just('"'),
                Just('\\'),
                Just('/'),
                Just('\u{0}'),
                Just('\u{8}'),
                Just('\u{c}'),
                Just('\n'),
                Just('\r'),
                Just('\t'),
                Just('\u{1f}'),
                Just('\u{7f}'),
                Just('é'),
                Just('\u{2028}'),
                Just('\u{1F600}'),
                any::<char>(),
            ],
            0..8
        )
        .prop_map(|chars| chars.into_iter().collect()),
    ]
}

fn numbers() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (0u64..1000).prop_map(Value::from),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        (-1e6f64..1e6).prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
    ]
}

fn values() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        numbers(),
        strings().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 96, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((strings(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Non-ASCII characters (which only occur inside strings) written as `\u` escapes, astral ones
/// as surrogate pairs.
fn ascii_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// `value` written with every string character escaped, in the short form where JSON has one
/// (`\/` included) and as `\u` escapes otherwise.
fn fully_escaped(value: &Value) -> String {
    fn string(text: &str, out: &mut String) {
        out.push('"');
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '/' => out.push_str("\\/"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                _ => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
            }
        }
        out.push('"');
    }
    fn render(value: &Value, out: &mut String) {
        match value {
            Value::String(text) => string(text, out),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    out.push_str(if i == 0 { "" } else { "," });
                    render(item, out);
                }
                out.push(']');
            }
            Value::Object(members) => {
                out.push('{');
                for (i, (key, item)) in members.iter().enumerate() {
                    out.push_str(if i == 0 { "" } else { "," });
                    string(key, out);
                    out.push(':');
                    render(item, out);
                }
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    render(value, &mut out);
    out
}

/// The renditions of one value that serde_json must read back as that value.
fn renditions(value: &Value) -> Vec<String> {
    let compact = serde_json::to_string(value).unwrap_or_default();
    let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
    // Raw line breaks only occur as whitespace (inside strings they are escaped).
    let odd_whitespace = format!("\t {}\r\n", pretty.replace('\n', "\r\n\t"));
    vec![
        fully_escaped(value),
        ascii_escaped(&compact),
        compact,
        ascii_escaped(&pretty),
        pretty,
        odd_whitespace,
    ]
}

/// serde_json's own parse with one addition, written apart from the crate: an object that
/// repeats a key is refused once it is complete, naming the first key that repeats an earlier
/// one.
fn strict_serde(text: &str) -> Result<Value, serde_json::Error> {
    struct Strict;
    impl<'de> DeserializeSeed<'de> for Strict {
        type Value = Value;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Strict {
        type Value = Value;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
            Ok(Value::Bool(b))
        }
        fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
            Ok(Value::from(n))
        }
        fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
            Ok(Value::from(n))
        }
        fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
            Number::from_f64(n)
                .map(Value::Number)
                .ok_or_else(|| E::custom("not finite"))
        }
        fn visit_str<E>(self, s: &str) -> Result<Value, E> {
            Ok(Value::String(s.to_owned()))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element_seed(Strict)? {
                items.push(item);
            }
            Ok(Value::Array(items))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut members = Map::new();
            let mut repeated = None;
            while let Some(key) = map.next_key::<String>()? {
                let value = map.next_value_seed(Strict)?;
                if members.insert(key.clone(), value).is_some() && repeated.is_none() {
                    repeated = Some(key);
                }
            }
            match repeated {
                Some(key) => Err(de::Error::custom(format_args!("duplicate field `{key}`"))),
                None => Ok(Value::Object(members)),
            }
        }
    }
    let mut d = serde_json::Deserializer::from_str(text);
    Strict
        .deserialize(&mut d)
        .and_then(|value| d.end().map(|()| value))
}

/// The property itself: the tree is serde_json's value and a refusal serde_json's refusal
/// (message, position, kind), a repeated key counting as a refusal; and that oracle is plain
/// serde_json wherever no key repeats.
fn agrees_with_serde(text: &str) -> Result<(), TestCaseError> {
    let mut arena = Arena::new();
    let ours = parse(text, &mut arena);
    let strict = strict_serde(text);
    match (&ours, &strict) {
        (Ok(tree), Ok(value)) => prop_assert_eq!(&tree.to_value(), value, "{}", text),
        (Err(error), Err(serde)) => {
            prop_assert_eq!(error.to_string(), serde.to_string(), "{}", text);
            prop_assert_eq!(
                (error.line(), error.column()),
                (serde.line(), serde.column())
            );
            let too_deep = serde.to_string().starts_with("recursion limit exceeded");
            prop_assert_eq!(matches!(error, JsonError::TooDeep { .. }), too_deep);
        }
        _ => {
            return Err(TestCaseError::fail(format!(
                "{text:?}: parsed {ours:?}, serde_json {strict:?}"
            )));
        }
    }
    match (strict, serde_json::from_str::<Value>(text)) {
        (Ok(strict), Ok(plain)) => prop_assert_eq!(strict, plain),
        (Err(strict), Err(plain)) if !strict.to_string().starts_with("duplicate field") => {
            prop_assert_eq!(strict.to_string(), plain.to_string())
        }
        (Err(strict), _) => prop_assert!(strict.to_string().starts_with("duplicate field")),
        (Ok(_), Err(plain)) => return Err(TestCaseError::fail(format!("{text:?}: {plain}"))),
    }
    Ok(())
}

/// Small edits that mostly break a document: a deleted range, an inserted token (anywhere, or
/// just before a bracket, brace, colon, comma or quote), a doubled range.
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, &'static str),
    BeforeStructural(usize, &'static str),
    Double(usize, usize),
}

const TOKENS: [&str; 20] = [
    "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "\\ud800", "0", "-", ".", "e", "1e999",
    "null", "tru", "\u{1}", " ", "\"k\":1,",
];

fn edits() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..4).prop_map(|(at, len)| Edit::Delete(at, len)),
        (any::<usize>(), prop::sample::select(&TOKENS[..])).prop_map(|(at, t)| Edit::Insert(at, t)),
        (any::<usize>(), prop::sample::select(&TOKENS[..]))
            .prop_map(|(nth, t)| Edit::BeforeStructural(nth, t)),
        (any::<usize>(), 1usize..12).prop_map(|(at, len)| Edit::Double(at, len)),
    ]
}

/// The nearest character boundary at or before `at % (len + 1)`.
fn boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

impl Edit {
    /// The same edit, its position moved into the part of the text from `from` on.
    fn shifted(self, from: usize) -> Self {
        let into = |at: usize| from + at % from.max(1);
        match self {
            Edit::Delete(at, len) => Edit::Delete(into(at), len),
            Edit::Insert(at, token) => Edit::Insert(into(at), token),
            Edit::BeforeStructural(nth, token) => Edit::BeforeStructural(nth, token),
            Edit::Double(at, len) => Edit::Double(into(at), len),
        }
    }
}

fn apply(text: &str, edit: &Edit) -> String {
    let mut out = text.to_owned();
    match *edit {
        Edit::Delete(at, len) => {
            let start = boundary(text, at);
            let end = boundary(text, start + len.min(text.len() - start));
            out.replace_range(start..end, "");
        }
        Edit::Insert(at, token) => out.insert_str(boundary(text, at), token),
        Edit::BeforeStructural(nth, token) => {
            let places: Vec<usize> = text
                .bytes()
                .enumerate()
                .filter(|(_, b)| b"]}:,\"".contains(b))
                .map(|(i, _)| i)
                .collect();
            if !places.is_empty() {
                out.insert_str(places[nth % places.len()], token);
            }
        }
        Edit::Double(at, len) => {
            let start = boundary(text, at);
            let end = boundary(text, start + len.min(text.len() - start));
            out.insert_str(end, &text[start..end]);
        }
    }
    out
}

/// A document of at least `bytes` bytes: an array repeating `items` (the two-thread scan
/// starts at 256 KiB).
fn large_document(items: &[Value], bytes: usize, pretty: bool, last_key: &str) -> String {
    let render = |v: &Value| {
        if pretty {
            serde_json::to_string_pretty(v)
        } else {
            serde_json::to_string(v)
        }
        .unwrap_or_default()
    };
    let rendered: Vec<String> = items.iter().map(render).collect();
    let mut parts = Vec::new();
    let mut size = 0;
    while size < bytes {
        for item in &rendered {
            size += item.len() + 1;
            parts.push(item.as_str());
        }
    }
    format!(
        "{{\"items\":[{}],\"{last_key}\":{}}}",
        parts.join(",\n"),
        rendered[0]
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(512)))]

    #[test]
    fn generated_documents_parse_as_serde_reads_them(value in values()) {
        for text in renditions(&value) {
            let mut arena = Arena::new();
            let tree = parse(&text, &mut arena);
            prop_assert!(tree.is_ok(), "{:?}: {:?}", text, tree);
            agrees_with_serde(&text)?;
        }
    }

    #[test]
    fn edited_documents_are_refused_as_serde_refuses_them(
        value in values(),
        edits in prop::collection::vec(edits(), 1..4),
    ) {
        let mut text = serde_json::to_string(&value).unwrap_or_default();
        for edit in &edits {
            text = apply(&text, edit);
        }
        agrees_with_serde(&text)?;
    }

    #[test]
    fn number_literals_read_as_serde_reads_them(
        literals in prop::collection::vec(
            "-?(0|[1-9][0-9]{0,24})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?|-?0[0-9]+|-?\\.5|1\\.|-",
            1..6,
        ),
    ) {
        agrees_with_serde(&format!("[{}]", literals.join(",")))?;
        agrees_with_serde(&literals[0])?;
    }

    /// A repeated key, at any depth, is refused with serde's wording and position style.
    #[test]
    fn repeated_keys_are_refused(value in values(), key in strings(), depth in 0usize..4) {
        let key_text = serde_json::to_string(&key).unwrap_or_default();
        let inner = serde_json::to_string(&value).unwrap_or_default();
        let mut text = format!("{{{key_text}:{inner},\"other\":1,{key_text}:null}}");
        for _ in 0..depth {
            text = format!("[{{\"x\":{text}}}]");
        }
        let mut arena = Arena::new();
        let error = parse(&text, &mut arena);
        prop_assert!(
            matches!(&error, Err(JsonError::Invalid { message, .. })
                if message.starts_with(&format!("duplicate field `{key}`"))),
            "{:?}",
            error
        );
        agrees_with_serde(&text)?;
    }

    /// The tree of an existing `Value` and of any deserializer equal the parsed tree.
    #[test]
    fn values_and_deserializers_give_the_same_tree(value in values()) {
        let text = serde_json::to_string(&value).unwrap_or_default();
        let mut parsed_arena = Arena::new();
        let parsed = parse(&text, &mut parsed_arena).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let arena = Arena::new();
        prop_assert_eq!(&Json::from_value(&value, &arena), &parsed);
        let mut d = serde_json::Deserializer::from_str(&text);
        let deserialized = Json::deserialize_in(&mut d, &arena).ok();
        prop_assert_eq!(deserialized.as_ref(), Some(&parsed));
    }
}

proptest! {
    // Each case parses a document of a few hundred kilobytes on two threads.
    #![proptest_config(ProptestConfig::with_cases(cases(24).min(96)))]

    #[test]
    fn large_documents_parse_as_serde_reads_them(
        items in prop::collection::vec(values(), 1..6),
        pretty in any::<bool>(),
        last_key in prop::sample::select(&["tail", "items"][..]),
        edit in proptest::option::of(edits()),
    ) {
        // The last key, read by the second thread, may repeat the first one.
        let mut text = large_document(&items, 300 * 1024, pretty, last_key);
        if let Some(edit) = edit {
            // The edit lands past the middle, in the second thread's part.
            text = apply(&text, &edit.shifted(text.len() / 2));
        }
        agrees_with_serde(&text)?;
    }
}

/// Nesting at and beyond the limit, as arrays and as objects.
#[test]
fn nesting_limit_is_serdes() {
    for depth in [
        trellis_json::MAX_NESTING - 1,
        trellis_json::MAX_NESTING,
        trellis_json::MAX_NESTING + 1,
    ] {
        let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let objects = format!("{}0{}", "{\"a\":".repeat(depth), "}".repeat(depth));
        for text in [arrays, objects] {
            let mut arena = Arena::new();
            assert_eq!(
                parse(&text, &mut arena).is_ok(),
                depth <= trellis_json::MAX_NESTING,
                "{depth}"
            );
            agrees_with_serde(&text).unwrap_or_else(|e| panic!("{depth}: {e}"));
        }
    }
}
