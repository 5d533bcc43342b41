//! A persistent JSON value for scope states: containers are shared behind `Arc`, so entering a
//! scope copies nothing and a write copies only the containers on its path.

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Map, Number, Value};
use trellis_graph::FieldPath;

/// JSON with structurally shared arrays and objects; objects keep insertion order.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum PValue {
    Null,
    Bool(bool),
    Number(Number),
    String(Arc<str>),
    Array(Arc<Vec<PValue>>),
    Object(Arc<IndexMap<Arc<str>, PValue>>),
}

impl PValue {
    pub(super) fn empty_object() -> Self {
        PValue::Object(Arc::new(IndexMap::new()))
    }

    pub(super) fn from_json(value: &Value) -> Self {
        match value {
            Value::Null => PValue::Null,
            Value::Bool(b) => PValue::Bool(*b),
            Value::Number(n) => PValue::Number(n.clone()),
            Value::String(s) => PValue::String(Arc::from(s.as_str())),
            Value::Array(items) => {
                PValue::Array(Arc::new(items.iter().map(Self::from_json).collect()))
            }
            Value::Object(map) => PValue::Object(Arc::new(
                map.iter()
                    .map(|(k, v)| (Arc::from(k.as_str()), Self::from_json(v)))
                    .collect(),
            )),
        }
    }

    pub(super) fn to_json(&self) -> Value {
        match self {
            PValue::Null => Value::Null,
            PValue::Bool(b) => Value::Bool(*b),
            PValue::Number(n) => Value::Number(n.clone()),
            PValue::String(s) => Value::String(s.to_string()),
            PValue::Array(items) => Value::Array(items.iter().map(Self::to_json).collect()),
            PValue::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (k, v) in map.iter() {
                    out.insert(k.to_string(), v.to_json());
                }
                Value::Object(out)
            }
        }
    }

    pub(super) fn as_array(&self) -> Option<&Arc<Vec<PValue>>> {
        match self {
            PValue::Array(items) => Some(items),
            _ => None,
        }
    }

    /// Follows `path` through objects.
    pub(super) fn select(&self, path: &FieldPath) -> Option<&PValue> {
        path.segments()
            .iter()
            .try_fold(self, |current, segment| match current {
                PValue::Object(map) => map.get(segment.as_str()),
                _ => None,
            })
    }

    /// Stores `new` at `path`, creating missing objects; `Err` when the path crosses a
    /// non-object.
    pub(super) fn set(&mut self, path: &FieldPath, new: PValue) -> Result<(), ()> {
        let Some((last, parents)) = path.segments().split_last() else {
            return Err(());
        };
        let mut current = self;
        for segment in parents {
            let PValue::Object(map) = current else {
                return Err(());
            };
            current = Arc::make_mut(map)
                .entry(Arc::from(segment.as_str()))
                .or_insert_with(PValue::empty_object);
        }
        let PValue::Object(map) = current else {
            return Err(());
        };
        Arc::make_mut(map).insert(Arc::from(last.as_str()), new);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use trellis_graph::FieldName;

    fn path(text: &str) -> FieldPath {
        FieldPath::new(
            text.split('.')
                .map(|s| FieldName::new(s).unwrap())
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn round_trips_and_keeps_key_order() {
        let v = json!({"z": 1, "a": [true, null, "s", 1.5], "m": {"k": {}}});
        let p = PValue::from_json(&v);
        assert_eq!(p.to_json(), v);
        let keys: Vec<String> = p.to_json().as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["z", "a", "m"]);
    }

    #[test]
    fn writes_do_not_leak_into_shared_copies() {
        let original = PValue::from_json(&json!({"a": {"b": 1}, "big": [1, 2, 3]}));
        let mut copy = original.clone();
        copy.set(&path("a.b"), PValue::from_json(&json!(2)))
            .unwrap();
        copy.set(&path("c.d"), PValue::Null).unwrap();
        assert_eq!(original.to_json(), json!({"a": {"b": 1}, "big": [1, 2, 3]}));
        assert_eq!(
            copy.to_json(),
            json!({"a": {"b": 2}, "big": [1, 2, 3], "c": {"d": null}})
        );
        assert!(copy.set(&path("big.x"), PValue::Null).is_err());
        assert_eq!(
            copy.select(&path("a.b")),
            Some(&PValue::from_json(&json!(2)))
        );
    }
}
