//! The fields of a record type: a map from field name to field kept as a vector sorted by name,
//! with the `BTreeMap` operations the rest of the workspace uses. The struct itself is declared
//! in `payload.rs` beside `PayloadType` and `RecordField`, the recursive type it is part of;
//! its operations live here.
//!
//! Records have a handful of fields and a graph has thousands of them (every group state, every
//! input and output): a B-tree leaf costs about 700 bytes however few entries it holds, a sorted
//! vector exactly what it holds, and lookups by binary search are as fast at this size.

use std::borrow::Borrow;

use serde::{Serialize, Serializer};

use crate::ident::FieldName;
pub use crate::payload::Fields;
use crate::payload::RecordField;

type Entry = (FieldName, RecordField);

impl Fields {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(capacity: usize) -> Self {
        Self(Vec::with_capacity(capacity))
    }

    fn position<Q>(&self, name: &Q) -> Result<usize, usize>
    where
        FieldName: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.binary_search_by(|(k, _)| k.borrow().cmp(name))
    }

    pub fn get<Q>(&self, name: &Q) -> Option<&RecordField>
    where
        FieldName: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(name).ok().map(|at| &self.0[at].1)
    }

    pub fn get_mut<Q>(&mut self, name: &Q) -> Option<&mut RecordField>
    where
        FieldName: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(name).ok().map(|at| &mut self.0[at].1)
    }

    pub fn contains_key<Q>(&self, name: &Q) -> bool
    where
        FieldName: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.position(name).is_ok()
    }

    /// Adds or replaces a field; returns the field it replaced.
    pub fn insert(&mut self, name: FieldName, field: RecordField) -> Option<RecordField> {
        match self.position(&name) {
            Ok(at) => Some(std::mem::replace(&mut self.0[at].1, field)),
            Err(at) => {
                self.0.insert(at, (name, field));
                None
            }
        }
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Fields in name order.
    pub fn iter(&self) -> Iter<'_> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &FieldName> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &RecordField> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }
}

/// Iterator over `(name, field)` in name order.
pub type Iter<'a> =
    std::iter::Map<std::slice::Iter<'a, Entry>, fn(&'a Entry) -> (&'a FieldName, &'a RecordField)>;

impl<'a> IntoIterator for &'a Fields {
    type Item = (&'a FieldName, &'a RecordField);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<(FieldName, RecordField)> for Fields {
    /// Like a `BTreeMap`, a repeated name keeps the last field given.
    fn from_iter<I: IntoIterator<Item = (FieldName, RecordField)>>(items: I) -> Self {
        let mut entries: Vec<Entry> = items.into_iter().collect();
        // Stable: equal names keep their given order, so the last one is the one kept.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
        for entry in entries {
            match out.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => out.push(entry),
            }
        }
        Self(out)
    }
}

impl Serialize for Fields {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::PayloadType;

    fn field(required: bool) -> RecordField {
        RecordField {
            ty: PayloadType::String,
            required,
        }
    }

    fn name(text: &str) -> FieldName {
        FieldName::new(text).unwrap()
    }

    #[test]
    fn fields_behave_like_an_ordered_map() {
        let mut fields = Fields::new();
        assert!(fields.insert(name("b"), field(true)).is_none());
        assert!(fields.insert(name("a"), field(false)).is_none());
        assert_eq!(fields.insert(name("b"), field(false)), Some(field(true)));
        assert_eq!(
            fields.keys().map(FieldName::as_str).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(fields.contains_key("a") && !fields.contains_key("c"));
        fields.get_mut("a").unwrap().required = true;
        assert_eq!(fields.get("a"), Some(&field(true)));
        let collected: Fields = [("z", true), ("m", false), ("z", false)]
            .into_iter()
            .map(|(n, r)| (name(n), field(r)))
            .collect();
        assert_eq!(collected.len(), 2);
        assert_eq!(collected.get("z"), Some(&field(false)));
        assert_eq!(
            serde_json::to_string(&collected).unwrap(),
            r#"{"m":{"type":{"kind":"string"},"required":false},"z":{"type":{"kind":"string"},"required":false}}"#
        );
    }
}
