//! Strict JSON reading: the document size limit, located parse errors, and the small
//! object-reading toolkit every wire type is read from a [`Json`] tree with. The tree itself,
//! and how text becomes one, is `trellis-json`'s.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;
use trellis_json::JsonError;
pub use trellis_json::{Arena, Json, JsonObject};

use crate::limits::{MAX_DOCUMENT_BYTES, MAX_JSON_NESTING};

/// One step of a location inside a JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonStep {
    Key(String),
    Index(usize),
}

/// A location inside a JSON document, rendered as `$.root.children[0].worker`.
///
/// Stored as a shared parent chain: the parser derives a path for every value it visits, and
/// extending a shared chain is O(1) where copying a step vector was O(depth).
#[derive(Clone, Default)]
pub struct JsonPath(Option<Arc<PathLink>>);

struct PathLink {
    parent: JsonPath,
    step: JsonStep,
}

impl JsonPath {
    pub fn root() -> Self {
        Self(None)
    }

    pub fn key(&self, key: &str) -> Self {
        self.push(JsonStep::Key(key.to_owned()))
    }

    pub fn index(&self, index: usize) -> Self {
        self.push(JsonStep::Index(index))
    }

    fn push(&self, step: JsonStep) -> Self {
        Self(Some(Arc::new(PathLink {
            parent: self.clone(),
            step,
        })))
    }

    /// The steps from the document root.
    pub fn steps(&self) -> Vec<JsonStep> {
        let mut steps = Vec::new();
        let mut at = &self.0;
        while let Some(link) = at {
            steps.push(link.step.clone());
            at = &link.parent.0;
        }
        steps.reverse();
        steps
    }
}

impl PartialEq for JsonPath {
    fn eq(&self, other: &Self) -> bool {
        self.steps() == other.steps()
    }
}

impl Eq for JsonPath {}

impl fmt::Debug for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("JsonPath").field(&self.steps()).finish()
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("$")?;
        for step in &self.steps() {
            match step {
                JsonStep::Key(key) if is_plain_key(key) => write!(f, ".{key}")?,
                JsonStep::Key(key) => write!(f, "[{}]", Value::String(key.clone()))?,
                JsonStep::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// A location while reading: a borrowed chain on the stack, turned into an owned [`JsonPath`]
/// only when an error is reported, so reading a large document allocates no paths.
#[derive(Clone, Copy)]
pub enum At<'a> {
    Base(&'a JsonPath),
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl<'a> At<'a> {
    pub fn key(&'a self, key: &'a str) -> At<'a> {
        At::Key(self, key)
    }

    pub fn index(&'a self, index: usize) -> At<'a> {
        At::Index(self, index)
    }

    pub fn to_path(&self) -> JsonPath {
        match self {
            At::Base(path) => (*path).clone(),
            At::Key(parent, key) => parent.to_path().key(key),
            At::Index(parent, index) => parent.to_path().index(*index),
        }
    }
}

/// Anything an error can be located at.
pub trait Locate {
    fn location(&self) -> JsonPath;
}

impl Locate for JsonPath {
    fn location(&self) -> JsonPath {
        self.clone()
    }
}

impl Locate for At<'_> {
    fn location(&self) -> JsonPath {
        self.to_path()
    }
}

fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A parse failure: what is wrong (wording modelled on serde's so the pinned phrases match) and
/// where in the document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at {location}")]
pub struct ParseError {
    pub message: String,
    pub location: JsonPath,
}

impl ParseError {
    pub fn new(message: impl Into<String>, location: &impl Locate) -> Self {
        Self {
            message: message.into(),
            location: location.location(),
        }
    }
}

fn check_size(text: &str) -> Result<(), ParseError> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(ParseError::new(
            format!(
                "document is {} bytes; the limit is {} bytes (16 MiB)",
                text.len(),
                MAX_DOCUMENT_BYTES
            ),
            &JsonPath::root(),
        ));
    }
    Ok(())
}

fn syntax_error(error: JsonError) -> ParseError {
    let message = match error {
        JsonError::TooDeep { line, column } => format!(
            "JSON nesting exceeds the parser's limit of {MAX_JSON_NESTING} levels (line {line}, column {column})"
        ),
        JsonError::Invalid { message, .. } => format!("invalid JSON: {message}"),
    };
    ParseError::new(message, &JsonPath::root())
}

/// Parses JSON text, refusing oversized documents, duplicate object keys and nesting beyond the
/// parser's limit, each with a clear message.
pub fn parse_strict(text: &str) -> Result<Value, ParseError> {
    let mut arena = Arena::new();
    Ok(parse_tree(text, &mut arena)?.to_value())
}

/// [`parse_strict`] into the [`Json`] tree the wire types are read from.
pub fn parse_tree<'a>(text: &'a str, arena: &'a mut Arena) -> Result<Json<'a>, ParseError> {
    check_size(text)?;
    trellis_json::parse(text, arena).map_err(syntax_error)
}

/// Gives a wire type with an inherent `read(&Json, &JsonPath)` its public entry points:
/// `parse` (from a `serde_json::Value`), `from_json_str` (strict text parsing) and serde's
/// `Deserialize` (errors keep their wording).
macro_rules! value_entry_point {
    ($($ty:ty),* $(,)?) => {$(
        impl $ty {
            /// Reads the wire type from a JSON value; errors carry the location under `at`.
            pub fn parse(
                value: &serde_json::Value,
                at: &$crate::json::JsonPath,
            ) -> Result<Self, $crate::json::ParseError> {
                let arena = $crate::json::Arena::new();
                Self::read(&$crate::json::Json::from_value(value, &arena), &$crate::json::At::Base(at))
            }
        }
    )*};
}
pub(crate) use value_entry_point;

macro_rules! wire_entry_points {
    ($($ty:ty),* $(,)?) => {$(
        $crate::json::value_entry_point!($ty);

        impl $ty {
            /// Parses JSON text strictly (size, nesting and duplicate-key checks included).
            pub fn from_json_str(text: &str) -> Result<Self, $crate::json::ParseError> {
                let mut arena = $crate::json::Arena::new();
                Self::read(&$crate::json::parse_tree(text, &mut arena)?, &$crate::json::At::Base(&$crate::json::JsonPath::root()))
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let arena = $crate::json::Arena::new();
                let value = $crate::json::Json::deserialize_in(d, &arena)?;
                Self::read(&value, &$crate::json::At::Base(&$crate::json::JsonPath::root()))
                    .map_err(serde::de::Error::custom)
            }
        }
    )*};
}
pub(crate) use wire_entry_points;

/// serde's rendering of an expected-names list: `a`, `a` or `b`, one of `a`, `b`, `c`.
pub fn one_of(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [only] => format!("`{only}`"),
        [first, second] => format!("`{first}` or `{second}`"),
        many => {
            let listed: Vec<String> = many.iter().map(|n| format!("`{n}`")).collect();
            format!("one of {}", listed.join(", "))
        }
    }
}

pub fn invalid_type(value: &Json, expected: &str, at: &At) -> ParseError {
    ParseError::new(
        format!("invalid type: {}, expected {expected}", describe(value)),
        at,
    )
}

/// How serde names a value in `invalid type` messages.
fn describe(value: &Json) -> String {
    match value {
        Json::Null => "null".to_owned(),
        Json::Bool(b) => format!("boolean `{b}`"),
        Json::Number(n) if n.is_f64() => format!("floating point `{n}`"),
        Json::Number(n) => format!("integer `{n}`"),
        Json::String(s) => format!("string {}", Value::String((*s).to_owned())),
        Json::Array(_) => "sequence".to_owned(),
        Json::Object(_) => "map".to_owned(),
    }
}

pub fn unknown_variant(found: &str, variants: &[&str], at: &At) -> ParseError {
    ParseError::new(
        format!("unknown variant `{found}`, expected {}", one_of(variants)),
        at,
    )
}

/// A JSON object being read as a closed struct: every key must be known, required keys present.
pub struct Obj<'a> {
    pub map: &'a JsonObject<'a>,
    pub at: &'a At<'a>,
}

impl<'a> Obj<'a> {
    /// Reads `value` as an object of the struct `type_name`, allowing only `fields`.
    pub fn closed(
        value: &'a Json<'a>,
        at: &'a At<'a>,
        type_name: &str,
        fields: &[&str],
    ) -> Result<Self, ParseError> {
        let obj = Self::open(value, at, type_name)?;
        obj.deny_unknown(fields)?;
        Ok(obj)
    }

    /// Reads `value` as an object without checking its keys yet.
    pub fn open(value: &'a Json<'a>, at: &'a At<'a>, type_name: &str) -> Result<Self, ParseError> {
        match value {
            Json::Object(map) => Ok(Self { map, at }),
            other => Err(invalid_type(other, &format!("struct {type_name}"), at)),
        }
    }

    pub fn deny_unknown(&self, fields: &[&str]) -> Result<(), ParseError> {
        for key in self.map.keys() {
            if !fields.contains(&key) {
                let expected = if fields.is_empty() {
                    "there are no fields".to_owned()
                } else {
                    format!("expected {}", one_of(fields))
                };
                return Err(ParseError::new(
                    format!("unknown field `{key}`, {expected}"),
                    self.at,
                ));
            }
        }
        Ok(())
    }

    pub fn path(&self, key: &'a str) -> At<'a> {
        At::Key(self.at, key)
    }

    /// The value of a required key (`null` counts as present).
    pub fn required(&self, key: &str) -> Result<&'a Json<'a>, ParseError> {
        self.map
            .get(key)
            .ok_or_else(|| ParseError::new(format!("missing field `{key}`"), self.at))
    }

    /// The value of an optional key; absent and `null` are both `None`.
    pub fn optional(&self, key: &str) -> Option<&'a Json<'a>> {
        match self.map.get(key) {
            None | Some(Json::Null) => None,
            Some(value) => Some(value),
        }
    }

    pub fn string(&self, key: &str) -> Result<&'a str, ParseError> {
        let value = self.required(key)?;
        value
            .as_str()
            .ok_or_else(|| invalid_type(value, "a string", &self.path(key)))
    }

    pub fn bool(&self, key: &str) -> Result<bool, ParseError> {
        let value = self.required(key)?;
        value
            .as_bool()
            .ok_or_else(|| invalid_type(value, "a boolean", &self.path(key)))
    }

    pub fn array(&self, key: &str) -> Result<&'a [Json<'a>], ParseError> {
        let value = self.required(key)?;
        value
            .as_array()
            .ok_or_else(|| invalid_type(value, "a sequence", &self.path(key)))
    }

    pub fn object(&self, key: &str) -> Result<&'a JsonObject<'a>, ParseError> {
        let value = self.required(key)?;
        value
            .as_object()
            .ok_or_else(|| invalid_type(value, "a map", &self.path(key)))
    }

    /// The string tag of an internally tagged enum named `enum_name`.
    pub fn tag(&self, tag: &str, enum_name: &str) -> Result<&'a str, ParseError> {
        match self.map.get(tag) {
            None => Err(ParseError::new(format!("missing field `{tag}`"), self.at)),
            Some(Json::String(s)) => Ok(s),
            Some(other) => Err(invalid_type(
                other,
                &format!("internally tagged enum {enum_name}"),
                &self.path(tag),
            )),
        }
    }
}

/// Reads `value` as an array of items parsed by `item`.
pub fn array_of<T>(
    value: &Json,
    at: &At,
    mut item: impl FnMut(&Json, &At) -> Result<T, ParseError>,
) -> Result<Vec<T>, ParseError> {
    let items = value
        .as_array()
        .ok_or_else(|| invalid_type(value, "a sequence", at))?;
    items
        .iter()
        .enumerate()
        .map(|(i, v)| item(v, &at.index(i)))
        .collect()
}

/// Reads an object whose value at `at` must be a JSON object: the tag of an internally tagged
/// enum, where a non-object gives serde's `expected internally tagged enum X` message.
pub fn tagged<'a>(
    value: &'a Json<'a>,
    at: &'a At<'a>,
    enum_name: &str,
) -> Result<Obj<'a>, ParseError> {
    match value {
        Json::Object(map) => Ok(Obj { map, at }),
        other => Err(invalid_type(
            other,
            &format!("internally tagged enum {enum_name}"),
            at,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_rejected() {
        let error = parse_strict(r#"{"a":1,"a":2}"#).unwrap_err();
        assert!(error.message.contains("duplicate field `a`"), "{error}");
    }

    #[test]
    fn deep_nesting_gets_a_clear_error() {
        let text = format!("{}{}", "[".repeat(400), "]".repeat(400));
        let error = parse_strict(&text).unwrap_err();
        assert!(error.message.contains("nesting exceeds"), "{error}");
    }

    #[test]
    fn trailing_garbage_is_rejected() {
        assert!(parse_strict("{} x").is_err());
    }

    #[test]
    fn paths_render_like_jq() {
        let path = JsonPath::root()
            .key("root")
            .key("children")
            .index(2)
            .key("a b");
        assert_eq!(path.to_string(), r#"$.root.children[2]["a b"]"#);
    }

    #[test]
    fn expected_lists_follow_serde() {
        assert_eq!(one_of(&["a"]), "`a`");
        assert_eq!(one_of(&["a", "b"]), "`a` or `b`");
        assert_eq!(one_of(&["a", "b", "c"]), "one of `a`, `b`, `c`");
    }
}
