//! A lightweight JSON tree for parsing wire types: objects keep their keys in a vector and
//! strings borrow from the document when they can, so reading a large graph allocates a
//! fraction of what a `serde_json::Value` (hashed, owned) costs.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

/// A parsed JSON value borrowing from its text where possible.
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(JsonObject<'a>),
}

/// An object's members in document order; keys are unique (checked while parsing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonObject<'a>(Vec<(Cow<'a, str>, Json<'a>)>);

/// Above this many members, duplicate keys are found with a sorted copy instead of a scan.
const LINEAR_DUPLICATE_CHECK: usize = 16;

impl<'a> JsonObject<'a> {
    /// Members known to have distinct keys.
    pub(crate) fn from_members(members: Vec<(Cow<'a, str>, Json<'a>)>) -> Self {
        Self(members)
    }

    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Json<'a>)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn first_duplicate(&self) -> Option<&str> {
        if self.0.len() <= LINEAR_DUPLICATE_CHECK {
            return self
                .0
                .iter()
                .enumerate()
                .find(|(i, (k, _))| self.0[..*i].iter().any(|(seen, _)| seen == k))
                .map(|(_, (k, _))| k.as_ref());
        }
        let mut keys: Vec<&str> = self.keys().collect();
        keys.sort_unstable();
        keys.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
    }
}

impl<'o, 'a> IntoIterator for &'o JsonObject<'a> {
    type Item = (&'o str, &'o Json<'a>);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'o, (Cow<'a, str>, Json<'a>)>,
        fn(&'o (Cow<'a, str>, Json<'a>)) -> (&'o str, &'o Json<'a>),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }
}

impl<'a> Json<'a> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json<'a>]> {
        match self {
            Self::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&JsonObject<'a>> {
        match self {
            Self::Object(map) => Some(map),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Self::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }

    /// A tree borrowing from `value` (for callers that already hold a `serde_json::Value`).
    pub fn from_value(value: &'a Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => Self::Number(n.clone()),
            Value::String(s) => Self::String(Cow::Borrowed(s)),
            Value::Array(items) => Self::Array(items.iter().map(Json::from_value).collect()),
            Value::Object(map) => Self::Object(JsonObject(
                map.iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), Json::from_value(v)))
                    .collect(),
            )),
        }
    }

    /// The same value as an owned `serde_json::Value` (for payloads kept as data).
    pub fn to_value(&self) -> Value {
        match self {
            Self::Null => Value::Null,
            Self::Bool(b) => Value::Bool(*b),
            Self::Number(n) => Value::Number(n.clone()),
            Self::String(s) => Value::String(s.to_string()),
            Self::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Self::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.to_owned(), v.to_value()))
                    .collect(),
            ),
        }
    }

    /// How serde names this value in `invalid type` messages.
    pub fn describe(&self) -> String {
        match self {
            Self::Null => "null".to_owned(),
            Self::Bool(b) => format!("boolean `{b}`"),
            Self::Number(n) if n.is_f64() => format!("floating point `{n}`"),
            Self::Number(n) => format!("integer `{n}`"),
            Self::String(s) => format!("string {}", Value::String(s.to_string())),
            Self::Array(_) => "sequence".to_owned(),
            Self::Object(_) => "map".to_owned(),
        }
    }
}

/// Builds a [`Json`] tree, refusing repeated object keys.
pub(crate) struct TreeSeed;

impl<'de> DeserializeSeed<'de> for TreeSeed {
    type Value = Json<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Json<'de>, D::Error> {
        deserializer.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Json<'de>, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Json<'de>, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json<'de>, E> {
        Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(v)))
    }

    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(TreeSeed)? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Json<'de>, A::Error> {
        let mut members = Vec::with_capacity(access.size_hint().unwrap_or(0));
        while let Some(key) = access.next_key_seed(KeySeed)? {
            let value = access.next_value_seed(TreeSeed)?;
            members.push((key, value));
        }
        let object = JsonObject(members);
        if let Some(key) = object.first_duplicate() {
            return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
        }
        Ok(Json::Object(object))
    }
}

/// Reads an object key, borrowing it from the text when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(text: &str) -> Result<Json<'_>, serde_json::Error> {
        let mut d = serde_json::Deserializer::from_str(text);
        TreeSeed.deserialize(&mut d)
    }

    #[test]
    fn trees_round_trip_through_values() {
        let text = r#"{"b":[1,2.5,"x\n",null,true],"a":{"k":-3}}"#;
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(tree(text).unwrap().to_value(), value);
        assert_eq!(Json::from_value(&value).to_value(), value);
    }

    #[test]
    fn duplicate_keys_are_refused_small_and_large() {
        assert!(
            tree(r#"{"a":1,"a":2}"#)
                .unwrap_err()
                .to_string()
                .contains("duplicate field `a`")
        );
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\":1")).collect();
        let text = format!("{{{},\"k7\":2}}", many.join(","));
        assert!(
            tree(&text)
                .unwrap_err()
                .to_string()
                .contains("duplicate field `k7`")
        );
    }
}
