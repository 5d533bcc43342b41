//! Field-path operations on plain JSON values (select, set, bind) and on sets of written paths,
//! plus the root-state filling both reducers start from.

use std::collections::BTreeSet;

use serde_json::{Map, Value};
use trellis_graph::{DataSelector, FieldPath, InputBinding, NodeName, PayloadType};

use crate::error::ReplayError;

/// Follows `path` through objects.
pub(crate) fn select<'v>(value: &'v Value, path: &FieldPath) -> Option<&'v Value> {
    path.segments()
        .iter()
        .try_fold(value, |current, segment| current.get(segment.as_str()))
}

/// Stores `new` at `path`, creating missing intermediate objects.
pub(crate) fn set_path(
    value: &mut Value,
    path: &FieldPath,
    new: Value,
    node: &NodeName,
) -> Result<(), ReplayError> {
    let shape = || ReplayError::StateShape {
        node: node.clone(),
        path: path.dotted(),
    };
    let Some((last, parents)) = path.segments().split_last() else {
        return Err(shape());
    };
    let mut current = value;
    for segment in parents {
        current = current
            .as_object_mut()
            .ok_or_else(shape)?
            .entry(segment.as_str())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    current
        .as_object_mut()
        .ok_or_else(shape)?
        .insert(last.as_str().to_owned(), new);
    Ok(())
}

/// Reads a data selector from the scope's state or the innermost map item.
pub(crate) fn select_data<'v>(
    selector: &DataSelector,
    state: &'v Value,
    item: Option<&'v Value>,
    node: &NodeName,
) -> Result<&'v Value, ReplayError> {
    let source = match selector {
        DataSelector::State { .. } => Some(state),
        DataSelector::Item { .. } => item,
    };
    source
        .and_then(|source| select(source, selector.path()))
        .ok_or_else(|| ReplayError::MissingStatePath {
            node: node.clone(),
            path: selector.path().dotted(),
        })
}

/// Builds an executable's input or a succeed's output: `null` without bindings, else an object
/// assembled binding by binding.
pub(crate) fn bind(
    bindings: &[InputBinding],
    state: &Value,
    item: Option<&Value>,
    node: &NodeName,
) -> Result<Value, ReplayError> {
    if bindings.is_empty() {
        return Ok(Value::Null);
    }
    let mut out = Value::Object(Map::new());
    for binding in bindings {
        let value = select_data(&binding.value, state, item, node)?.clone();
        set_path(&mut out, &binding.target, value, node)?;
    }
    Ok(out)
}

/// The written paths that a group promoting `promoted` carries outward: a write under a
/// promoted path is kept as written, a write above one is narrowed to the promoted path, and
/// paths covered by another kept path are dropped.
pub(crate) fn promoted_write_paths(
    written: &BTreeSet<FieldPath>,
    promoted: &[FieldPath],
) -> BTreeSet<FieldPath> {
    let mut candidates = BTreeSet::new();
    for p in promoted {
        for w in written {
            if p.is_prefix_of(w) {
                candidates.insert(w.clone());
            } else if w.is_prefix_of(p) {
                candidates.insert(p.clone());
            }
        }
    }
    candidates
        .iter()
        .filter(|c| !candidates.iter().any(|o| o != *c && o.is_prefix_of(c)))
        .cloned()
        .collect()
}

/// True when some written path overlaps `path`.
pub(crate) fn wrote(written: &BTreeSet<FieldPath>, path: &FieldPath) -> bool {
    written.iter().any(|w| w.overlaps(path))
}

/// Root state: the initial input with every missing required field of `state` filled with its
/// empty value, recursing into the records the input does carry.
pub(crate) fn fill_root_state(state: Option<&PayloadType>, input: &Value) -> Value {
    let mut value = input.clone();
    if let Some(ty) = state {
        fill_missing(ty, &mut value);
    }
    value
}

fn fill_missing(ty: &PayloadType, value: &mut Value) {
    let (Some(fields), Value::Object(object)) = (ty.fields(), value) else {
        return;
    };
    for (name, field) in fields {
        match object.get_mut(name.as_str()) {
            Some(present) => fill_missing(&field.ty, present),
            None if field.required => {
                if let Some(empty) = field.ty.empty_value() {
                    object.insert(name.as_str().to_owned(), empty);
                }
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use trellis_graph::{FieldName, JsonPath};

    fn path(text: &str) -> FieldPath {
        let segments = text
            .split('.')
            .map(|s| FieldName::new(s).unwrap())
            .collect();
        FieldPath::new(segments).unwrap()
    }

    #[test]
    fn promoted_write_paths_narrow_and_deduplicate() {
        let written: BTreeSet<FieldPath> = [path("a.b"), path("c"), path("d.e")].into();
        let kept = promoted_write_paths(&written, &[path("a"), path("c.x"), path("z")]);
        assert_eq!(kept, [path("a.b"), path("c.x")].into());
    }

    #[test]
    fn set_path_creates_objects_and_refuses_scalars() {
        let node = NodeName::new("n").unwrap();
        let mut v = json!({"a": 1});
        set_path(&mut v, &path("b.c"), json!(2), &node).unwrap();
        assert_eq!(v, json!({"a": 1, "b": {"c": 2}}));
        assert!(set_path(&mut v, &path("a.x"), json!(3), &node).is_err());
    }

    #[test]
    fn root_state_fills_required_empties_recursively() {
        let ty = PayloadType::parse(
            &json!({"kind":"record","fields":{
                "task":{"type":{"kind":"string"},"required":true},
                "items":{"type":{"kind":"array","items":{"kind":"null"}},"required":true},
                "count":{"type":{"kind":"integer"},"required":true},
                "ctx":{"type":{"kind":"record","fields":{
                    "note":{"type":{"kind":"string"},"required":true}}},"required":false}}}),
            &JsonPath::root(),
        )
        .unwrap();
        let state = fill_root_state(Some(&ty), &json!({"task": "t", "ctx": {}}));
        assert_eq!(
            state,
            json!({"task": "t", "ctx": {"note": ""}, "items": []})
        );
    }
}
