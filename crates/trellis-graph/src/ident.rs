//! Validated scalar building blocks: identifiers, field paths, stable references, positive
//! integers, enum sets, node instructions and fail reasons.

use std::fmt;

use compact_str::CompactString;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::json::Json;
use crate::json::{At, JsonPath, ParseError, array_of, invalid_type};
use crate::limits::{
    MAX_COLLECTION_ITEMS, MAX_FIELD_PATH_SEGMENTS, MAX_IDENTIFIER_BYTES, MAX_INSTRUCTIONS_BYTES,
    MAX_SAFE_INTEGER, MAX_STABLE_REF_BYTES,
};

/// Bytes allowed after an identifier's first: ASCII letters, digits, `_`, `-` and `.` (a
/// table: every name of a graph is checked, a byte at a time).
static IDENTIFIER_BYTES: [bool; 256] = {
    let mut allowed = [false; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        allowed[b] = byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.');
        b += 1;
    }
    allowed
};

/// Every allowed character is ASCII, so bytes are checked (a non-ASCII byte fails as its
/// character would).
fn is_identifier_syntax(text: &str) -> bool {
    match text.as_bytes() {
        [first, rest @ ..] if first.is_ascii_alphabetic() || *first == b'_' => {
            rest.iter().all(|b| IDENTIFIER_BYTES[usize::from(*b)])
        }
        _ => false,
    }
}

fn check_identifier(kind: &str, text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err(format!("{kind} must not be empty"));
    }
    if text.len() > MAX_IDENTIFIER_BYTES {
        return Err(format!(
            "{kind} exceeds the maximum length of {MAX_IDENTIFIER_BYTES}"
        ));
    }
    if !is_identifier_syntax(text) {
        return Err(format!("{kind} contains invalid characters: {text}"));
    }
    Ok(())
}

fn string_at<'a>(value: &'a Json, at: &At) -> Result<&'a str, ParseError> {
    value
        .as_str()
        .ok_or_else(|| invalid_type(value, "a string", at))
}

/// Identifiers keep their text inline when it fits (24 bytes, most names): a large graph
/// holds tens of thousands of names, and one allocation each was half of what parsing and
/// dropping a graph allocated.
macro_rules! identifier {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(CompactString);

        impl $name {
            /// Validates `text` as this identifier kind.
            pub fn new(text: &str) -> Result<Self, String> {
                check_identifier($kind, text)?;
                Ok(Self(CompactString::new(text)))
            }

            pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
                Self::new(string_at(value, at)?).map_err(|m| ParseError::new(m, at))
            }

            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }

            /// Wraps a literal the caller knows to be valid (wire field names, built-in labels).
            pub fn from_static(text: &'static str) -> Self {
                debug_assert!(check_identifier($kind, text).is_ok(), "invalid literal {text}");
                Self(CompactString::const_new(text))
            }
        }

        crate::json::value_entry_point!($name);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                Self::new(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}

identifier!(
    /// The name of a graph node; unique within a graph.
    NodeName,
    "node name"
);
identifier!(
    /// The name of a record field or signal.
    FieldName,
    "field name"
);
identifier!(
    /// One label of an enum type or control domain.
    EnumLabel,
    "enum label"
);

/// A non-empty path of field names into a payload (`["a","b"]` is `a.b`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct FieldPath(Vec<FieldName>);

impl FieldPath {
    pub fn new(segments: Vec<FieldName>) -> Result<Self, String> {
        if segments.is_empty() {
            return Err("field path must not be empty".to_owned());
        }
        if segments.len() > MAX_FIELD_PATH_SEGMENTS {
            return Err(format!(
                "field path exceeds the maximum length of {MAX_FIELD_PATH_SEGMENTS}"
            ));
        }
        Ok(Self(segments))
    }

    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let segments = array_of(value, at, FieldName::read)?;
        Self::new(segments).map_err(|m| ParseError::new(m, at))
    }

    pub fn segments(&self) -> &[FieldName] {
        &self.0
    }

    /// True when `self` is a prefix of `other` (or equal to it).
    pub fn is_prefix_of(&self, other: &FieldPath) -> bool {
        other.0.len() >= self.0.len() && other.0[..self.0.len()] == self.0[..]
    }

    /// True when one path is a prefix of the other.
    pub fn overlaps(&self, other: &FieldPath) -> bool {
        self.is_prefix_of(other) || other.is_prefix_of(self)
    }

    /// Dot-joined rendering, as in `a.b`.
    pub fn dotted(&self) -> String {
        let parts: Vec<&str> = self.0.iter().map(FieldName::as_str).collect();
        parts.join(".")
    }
}

impl<'de> Deserialize<'de> for FieldPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let segments = Vec::<FieldName>::deserialize(d)?;
        Self::new(segments).map_err(serde::de::Error::custom)
    }
}

/// A stable reference `name@version` naming a worker, policy, artifact type or credential.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StableRef(String);

/// A reference to a worker descriptor.
pub type WorkerRef = StableRef;
/// A reference to a capability policy.
pub type PolicyRef = StableRef;

impl StableRef {
    pub fn new(text: &str) -> Result<Self, String> {
        const FORM: &str = "stable reference must have the form name@positiveVersion";
        if text.len() > MAX_STABLE_REF_BYTES {
            return Err(FORM.to_owned());
        }
        let Some((name, version)) = text.rsplit_once('@') else {
            return Err(FORM.to_owned());
        };
        if !is_identifier_syntax(name) {
            return Err(format!("stable reference name is invalid: {name}"));
        }
        let digits_ok = !version.is_empty()
            && version.bytes().all(|b| b.is_ascii_digit())
            && !version.starts_with('0');
        if !digits_ok {
            return Err("stable reference version must be a positive decimal integer".to_owned());
        }
        Ok(Self(text.to_owned()))
    }

    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        Self::new(string_at(value, at)?).map_err(|m| ParseError::new(m, at))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The part before the last `@`.
    pub fn name(&self) -> &str {
        self.0.rsplit_once('@').map_or(self.0.as_str(), |(n, _)| n)
    }
}

impl fmt::Display for StableRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for StableRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for StableRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::new(&text).map_err(serde::de::Error::custom)
    }
}

/// An integer in `1..=2^53-1`; integral floats such as `1.0` are accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct PositiveInteger(u64);

impl PositiveInteger {
    pub fn new(value: u64) -> Result<Self, String> {
        if value < 1 {
            return Err("integer must be at least 1".to_owned());
        }
        if value > MAX_SAFE_INTEGER {
            return Err("integer is outside the JavaScript-safe range".to_owned());
        }
        Ok(Self(value))
    }

    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let number = match value {
            Json::Number(n) => n,
            other => return Err(invalid_type(other, "a positive integer", at)),
        };
        let checked = if let Some(u) = number.as_u64() {
            Self::new(u)
        } else if number.as_i64().is_some() {
            Err("integer must be at least 1".to_owned())
        } else {
            match number.as_f64() {
                Some(f) if f.fract() != 0.0 || !f.is_finite() => {
                    Err("number is not an integer".to_owned())
                }
                Some(f) if f < 1.0 => Err("integer must be at least 1".to_owned()),
                Some(f) if f > MAX_SAFE_INTEGER as f64 => {
                    Err("integer is outside the JavaScript-safe range".to_owned())
                }
                // In range and integral, so the cast is exact.
                Some(f) => Self::new(f as u64),
                None => Err("number is not an integer".to_owned()),
            }
        };
        checked.map_err(|m| ParseError::new(m, at))
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for PositiveInteger {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        let arena = crate::json::Arena::new();
        Self::read(
            &Json::from_value(&value, &arena),
            &At::Base(&JsonPath::root()),
        )
        .map_err(|e| serde::de::Error::custom(e.message))
    }
}

/// A non-empty, duplicate-free set of enum labels, kept sorted by bytes (a sorted vector: sets
/// are small and a graph holds thousands of them, one per guard and signal).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct EnumSet(Vec<EnumLabel>);

impl EnumSet {
    pub fn new(mut labels: Vec<EnumLabel>) -> Result<Self, String> {
        if labels.is_empty() {
            return Err("enum set must not be empty".to_owned());
        }
        if labels.len() > MAX_COLLECTION_ITEMS {
            return Err(format!(
                "collection exceeds the maximum length of {MAX_COLLECTION_ITEMS}"
            ));
        }
        labels.sort_unstable();
        if labels.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err("enum set must not contain duplicate values".to_owned());
        }
        labels.shrink_to_fit();
        Ok(Self(labels))
    }

    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let labels = array_of(value, at, EnumLabel::read)?;
        Self::new(labels).map_err(|m| ParseError::new(m, at))
    }

    /// Builds a set from labels known to be valid (used for built-in domains); repeats collapse.
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = &'a EnumLabel>) -> Option<Self> {
        let mut set: Vec<EnumLabel> = labels.into_iter().cloned().collect();
        set.sort_unstable();
        set.dedup();
        (!set.is_empty()).then_some(Self(set))
    }

    /// The labels in byte order.
    pub fn labels(&self) -> &[EnumLabel] {
        &self.0
    }

    pub fn contains(&self, label: &str) -> bool {
        self.0.binary_search_by(|l| l.as_str().cmp(label)).is_ok()
    }

    pub fn is_subset(&self, other: &EnumSet) -> bool {
        // Both sorted: one pass over `other`.
        let mut rest = other.0.iter();
        self.0.iter().all(|label| rest.any(|o| o == label))
    }

    pub fn iter(&self) -> impl Iterator<Item = &EnumLabel> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de> Deserialize<'de> for EnumSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let labels = Vec::<EnumLabel>::deserialize(d)?;
        Self::new(labels).map_err(serde::de::Error::custom)
    }
}

/// Reads a non-empty array of at most 4096 items.
pub fn non_empty_vec<T>(
    value: &Json,
    at: &At,
    item: impl FnMut(&Json, &At) -> Result<T, ParseError>,
) -> Result<Vec<T>, ParseError> {
    if let Json::Array(items) = value {
        if items.is_empty() {
            return Err(ParseError::new(
                "non-empty collection must not be empty",
                at,
            ));
        }
        if items.len() > MAX_COLLECTION_ITEMS {
            return Err(ParseError::new(
                format!("collection exceeds the maximum length of {MAX_COLLECTION_ITEMS}"),
                at,
            ));
        }
    }
    array_of(value, at, item)
}

/// Authored prose for an agent-backed node: non-blank, at most 16384 UTF-8 bytes, no NUL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct NodeInstructions(String);

impl NodeInstructions {
    pub fn new(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Err("node instructions must contain a non-whitespace character".to_owned());
        }
        if text.len() > MAX_INSTRUCTIONS_BYTES {
            return Err(format!(
                "node instructions exceed {MAX_INSTRUCTIONS_BYTES} UTF-8 bytes"
            ));
        }
        if text.contains('\0') {
            return Err("node instructions must not contain NUL".to_owned());
        }
        Ok(Self(text.to_owned()))
    }

    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        Self::new(string_at(value, at)?).map_err(|m| ParseError::new(m, at))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The reason a `fail` terminal reports; `unhandled` is reserved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct FailReason(EnumLabel);

impl FailReason {
    pub fn new(text: &str) -> Result<Self, String> {
        let label = EnumLabel::new(text)?;
        if text == "unhandled" {
            return Err(
                "fail reason 'unhandled' is reserved for the compiler's implicit sink".to_owned(),
            );
        }
        Ok(Self(label))
    }

    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        Self::new(string_at(value, at)?).map_err(|m| ParseError::new(m, at))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

crate::json::value_entry_point!(
    FieldPath,
    StableRef,
    PositiveInteger,
    EnumSet,
    NodeInstructions,
    FailReason
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_follow_the_grammar() {
        assert!(NodeName::new("a.b-c_1").is_ok());
        assert_eq!(
            NodeName::new("").unwrap_err(),
            "node name must not be empty"
        );
        assert_eq!(
            FieldName::new("1x").unwrap_err(),
            "field name contains invalid characters: 1x"
        );
        assert_eq!(
            EnumLabel::new(&"a".repeat(129)).unwrap_err(),
            "enum label exceeds the maximum length of 128"
        );
    }

    #[test]
    fn stable_refs_split_at_the_last_at() {
        assert_eq!(
            StableRef::new("a@b@1").unwrap_err(),
            "stable reference name is invalid: a@b"
        );
        assert!(StableRef::new("policy.strict@12").is_ok());
        assert!(
            StableRef::new("p@0")
                .unwrap_err()
                .contains("positive decimal")
        );
        assert!(
            StableRef::new("p@01")
                .unwrap_err()
                .contains("positive decimal")
        );
        assert!(
            StableRef::new("p")
                .unwrap_err()
                .contains("name@positiveVersion")
        );
    }

    #[test]
    fn positive_integers_accept_integral_floats() {
        let at = JsonPath::root();
        let one: Value = serde_json::from_str("1.0").unwrap();
        assert_eq!(PositiveInteger::parse(&one, &at).unwrap().get(), 1);
        let half: Value = serde_json::from_str("1.5").unwrap();
        assert!(
            PositiveInteger::parse(&half, &at)
                .unwrap_err()
                .message
                .contains("not an integer")
        );
        let zero: Value = serde_json::from_str("0").unwrap();
        assert!(
            PositiveInteger::parse(&zero, &at)
                .unwrap_err()
                .message
                .contains("at least 1")
        );
        let big: Value = serde_json::from_str("9007199254740992").unwrap();
        assert!(
            PositiveInteger::parse(&big, &at)
                .unwrap_err()
                .message
                .contains("JavaScript-safe")
        );
    }

    #[test]
    fn enum_sets_sort_and_reject_duplicates() {
        let at = JsonPath::root();
        let set = EnumSet::parse(&serde_json::json!(["b", "a"]), &at).unwrap();
        assert_eq!(
            serde_json::to_value(&set).unwrap(),
            serde_json::json!(["a", "b"])
        );
        assert!(EnumSet::parse(&serde_json::json!(["a", "a"]), &at).is_err());
        assert!(EnumSet::parse(&serde_json::json!([]), &at).is_err());
        assert!(set.contains("a") && set.contains("b") && !set.contains("c"));
        let set_of = |labels: serde_json::Value| EnumSet::parse(&labels, &at).unwrap();
        let abc = set_of(serde_json::json!(["c", "a", "b"]));
        assert!(set.is_subset(&abc) && !abc.is_subset(&set));
        assert!(!set_of(serde_json::json!(["a", "d"])).is_subset(&abc));
        assert!(set_of(serde_json::json!(["c"])).is_subset(&abc));
    }
}
