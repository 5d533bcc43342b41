//! The borrowed JSON tree: arrays and objects are slices in an arena (objects keep their keys
//! in document order) and strings borrow from the document when they can, so reading a large
//! graph costs a few arena chunks instead of an allocation per value, and dropping the tree is
//! freeing the arena.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

/// Memory for a tree's arrays, objects and unescaped strings, released all at once. It has two
/// halves because a large document is read by two threads, each filling its own (a bump
/// arena is not shared between threads).
#[derive(Default)]
pub struct Arena {
    first: bumpalo::Bump,
    second: bumpalo::Bump,
}

impl Arena {
    pub fn new() -> Self {
        Self::default()
    }

    /// Allocation in the first half, for readers on one thread.
    pub(crate) fn alloc(&self) -> Alloc<'_> {
        Alloc(&self.first)
    }

    /// Both halves: one for the calling thread, one to hand to a second thread.
    pub(crate) fn halves(&mut self) -> (Alloc<'_>, &mut bumpalo::Bump) {
        (Alloc(&self.first), &mut self.second)
    }
}

/// One thread's allocation handle into an [`Arena`] half.
#[derive(Clone, Copy)]
pub(crate) struct Alloc<'a>(pub(crate) &'a bumpalo::Bump);

impl<'a> Alloc<'a> {
    pub(crate) fn slice<T>(self, items: impl ExactSizeIterator<Item = T>) -> &'a [T] {
        self.0.alloc_slice_fill_iter(items)
    }

    pub(crate) fn str(self, text: &str) -> &'a str {
        self.0.alloc_str(text)
    }
}

/// A parsed JSON value borrowing from its text (or its arena, for strings with escapes).
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(&'a str),
    Array(&'a [Json<'a>]),
    Object(JsonObject<'a>),
}

/// An object's members in document order; keys are unique (checked while parsing).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JsonObject<'a>(&'a [(&'a str, Json<'a>)]);

/// Above this many members, duplicate keys are found with a sorted copy instead of a scan.
const LINEAR_DUPLICATE_CHECK: usize = 16;

// The accessors are `#[inline]` because the typed readers of other crates call them for every
// member they look up, and without it they could not be inlined across the crate boundary.
impl<'a> JsonObject<'a> {
    /// Members known to have distinct keys.
    pub(crate) fn from_members(members: &'a [(&'a str, Json<'a>)]) -> Self {
        Self(members)
    }

    #[inline]
    pub fn get(&self, key: &str) -> Option<&'a Json<'a>> {
        // Lengths and first bytes settle most mismatches without a byte-wise comparison.
        let first = key.as_bytes().first();
        self.0
            .iter()
            .find(|(k, _)| k.len() == key.len() && k.as_bytes().first() == first && *k == key)
            .map(|(_, v)| v)
    }

    #[inline]
    pub fn keys(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        self.0.iter().map(|(k, _)| *k)
    }

    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a Json<'a>)> + use<'a> {
        self.0.iter().map(|(k, v)| (*k, v))
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The first key, in document order, that repeats an earlier one.
    fn first_duplicate(&self) -> Option<&str> {
        if self.0.len() <= LINEAR_DUPLICATE_CHECK {
            return self
                .0
                .iter()
                .enumerate()
                .find(|(i, (k, _))| self.0[..*i].iter().any(|(seen, _)| seen == k))
                .map(|(_, (k, _))| *k);
        }
        let mut keys: Vec<(&str, usize)> = self.keys().zip(0..).collect();
        keys.sort_unstable();
        keys.windows(2)
            .filter(|w| w[0].0 == w[1].0)
            .min_by_key(|w| w[1].1)
            .map(|w| w[1].0)
    }
}

impl<'a> IntoIterator for &JsonObject<'a> {
    type Item = (&'a str, &'a Json<'a>);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (&'a str, Json<'a>)>,
        fn(&'a (&'a str, Json<'a>)) -> (&'a str, &'a Json<'a>),
    >;

    #[inline]
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (*k, v))
    }
}

impl<'a> Json<'a> {
    #[inline]
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    #[inline]
    pub fn as_array(&self) -> Option<&[Json<'a>]> {
        match self {
            Self::Array(items) => Some(items),
            _ => None,
        }
    }

    #[inline]
    pub fn as_object(&self) -> Option<&JsonObject<'a>> {
        match self {
            Self::Object(map) => Some(map),
            _ => None,
        }
    }

    #[inline]
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            _ => None,
        }
    }

    #[inline]
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Self::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    #[inline]
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }

    /// The tree of the value `deserializer` yields, refusing repeated object keys (for
    /// `Deserialize` implementations reading through the tree).
    pub fn deserialize_in<'de: 'a, D: de::Deserializer<'de>>(
        deserializer: D,
        arena: &'a Arena,
    ) -> Result<Self, D::Error> {
        TreeSeed(arena.alloc()).deserialize(deserializer)
    }

    /// A tree borrowing from `value` (for callers that already hold a `serde_json::Value`).
    pub fn from_value(value: &'a Value, arena: &'a Arena) -> Self {
        Self::from_value_in(value, arena.alloc())
    }

    fn from_value_in(value: &'a Value, arena: Alloc<'a>) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => Self::Number(n.clone()),
            Value::String(s) => Self::String(s),
            Value::Array(items) => {
                Self::Array(arena.slice(items.iter().map(|v| Json::from_value_in(v, arena))))
            }
            Value::Object(map) => Self::Object(JsonObject(
                arena.slice(
                    map.iter()
                        .map(|(k, v)| (k.as_str(), Json::from_value_in(v, arena))),
                ),
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
}

/// Builds a [`Json`] tree in an arena, refusing repeated object keys.
#[derive(Clone, Copy)]
pub(crate) struct TreeSeed<'a>(pub(crate) Alloc<'a>);

impl<'de: 'a, 'a> DeserializeSeed<'de> for TreeSeed<'a> {
    type Value = Json<'a>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Json<'a>, D::Error> {
        deserializer.deserialize_any(TreeVisitor(self.0))
    }
}

struct TreeVisitor<'a>(Alloc<'a>);

impl<'de: 'a, 'a> Visitor<'de> for TreeVisitor<'a> {
    type Value = Json<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Json<'a>, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Json<'a>, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Json<'a>, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json<'a>, E> {
        Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Json<'a>, E> {
        Ok(Json::String(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Json<'a>, E> {
        Ok(Json::String(self.0.str(v)))
    }

    fn visit_unit<E>(self) -> Result<Json<'a>, E> {
        Ok(Json::Null)
    }

    fn visit_none<E>(self) -> Result<Json<'a>, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Json<'a>, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'a>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(TreeSeed(self.0))? {
            items.push(item);
        }
        Ok(Json::Array(self.0.slice(items.into_iter())))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Json<'a>, A::Error> {
        let mut members = Vec::with_capacity(access.size_hint().unwrap_or(0));
        while let Some(key) = access.next_key_seed(KeySeed(self.0))? {
            let value = access.next_value_seed(TreeSeed(self.0))?;
            members.push((key, value));
        }
        let object = JsonObject(self.0.slice(members.into_iter()));
        if let Some(key) = object.first_duplicate() {
            return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
        }
        Ok(Json::Object(object))
    }
}

/// Reads an object key, borrowing it from the text when it has no escapes.
struct KeySeed<'a>(Alloc<'a>);

impl<'de: 'a, 'a> DeserializeSeed<'de> for KeySeed<'a> {
    type Value = &'a str;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<&'a str, D::Error> {
        d.deserialize_str(KeyVisitor(self.0))
    }
}

struct KeyVisitor<'a>(Alloc<'a>);

impl<'de: 'a, 'a> Visitor<'de> for KeyVisitor<'a> {
    type Value = &'a str;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<&'a str, E> {
        Ok(v)
    }

    fn visit_str<E>(self, v: &str) -> Result<&'a str, E> {
        Ok(self.0.str(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree<'a>(text: &'a str, arena: &'a Arena) -> Result<Json<'a>, serde_json::Error> {
        let mut d = serde_json::Deserializer::from_str(text);
        TreeSeed(arena.alloc()).deserialize(&mut d)
    }

    #[test]
    fn trees_round_trip_through_values() {
        let text = r#"{"b":[1,2.5,"x\n",null,true],"a":{"k":-3}}"#;
        let value: Value = serde_json::from_str(text).unwrap();
        let arena = Arena::new();
        assert_eq!(tree(text, &arena).unwrap().to_value(), value);
        assert_eq!(Json::from_value(&value, &arena).to_value(), value);
    }

    #[test]
    fn duplicate_keys_are_refused_small_and_large() {
        assert!(
            tree(r#"{"a":1,"a":2}"#, &Arena::new())
                .unwrap_err()
                .to_string()
                .contains("duplicate field `a`")
        );
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\":1")).collect();
        let text = format!("{{{},\"k9\":2,\"k7\":2}}", many.join(","));
        assert!(
            tree(&text, &Arena::new())
                .unwrap_err()
                .to_string()
                .contains("duplicate field `k9`")
        );
    }
}
