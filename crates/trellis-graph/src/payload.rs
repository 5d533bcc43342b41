//! The closed PayloadType algebra: parsing, subtyping, path lookup and value checking.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::ident::{EnumSet, FieldName, FieldPath};
use crate::json::Json;
use crate::json::{At, Obj, ParseError, unknown_variant};

/// The type of a payload: a node's input or output, a group's state, a verifier diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PayloadType {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Record { fields: Fields },
    Array { items: Box<PayloadType> },
    Enum { values: EnumSet },
}

/// One field of a record type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct RecordField {
    #[serde(rename = "type")]
    pub ty: PayloadType,
    pub required: bool,
}

/// Record fields, unique and sorted by name (the order a `BTreeMap` iterates in); the map's
/// operations are in `fields.rs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Fields(pub(crate) Vec<(FieldName, RecordField)>);

const PAYLOAD_KINDS: [&str; 8] = [
    "null", "boolean", "integer", "number", "string", "record", "array", "enum",
];

impl PayloadType {
    /// Parses a payload type; extra keys are reported before an unknown kind (spec order).
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let Json::Object(map) = value else {
            return Err(ParseError::new("payload type must be an object", at));
        };
        let Some(Json::String(kind)) = map.get("kind") else {
            return Err(ParseError::new("payload type requires a string kind", at));
        };
        let allowed: &[&str] = match *kind {
            "record" => &["kind", "fields"],
            "array" => &["kind", "items"],
            "enum" => &["kind", "values"],
            _ => &["kind"],
        };
        if let Some(extra) = map.keys().find(|k| !allowed.contains(k)) {
            return Err(ParseError::new(
                format!("unknown field `{extra}` in payload type `{kind}`"),
                at,
            ));
        }
        let obj = Obj { map, at };
        Ok(match *kind {
            "null" => Self::Null,
            "boolean" => Self::Boolean,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "string" => Self::String,
            "record" => {
                let fields_at = obj.path("fields");
                let members = obj.object("fields")?;
                let mut fields = Fields::with_capacity(members.len());
                for (name, field) in members {
                    let field_at = fields_at.key(name);
                    let name = FieldName::new(name).map_err(|m| ParseError::new(m, &field_at))?;
                    fields.insert(name, RecordField::read(field, &field_at)?);
                }
                Self::Record { fields }
            }
            "array" => Self::Array {
                items: Box::new(Self::read(obj.required("items")?, &obj.path("items"))?),
            },
            "enum" => Self::Enum {
                values: EnumSet::read(obj.required("values")?, &obj.path("values"))?,
            },
            other => return Err(unknown_variant(other, &PAYLOAD_KINDS, &obj.path("kind"))),
        })
    }

    /// The wire name of this type's kind.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Boolean => "boolean",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::String => "string",
            Self::Record { .. } => "record",
            Self::Array { .. } => "array",
            Self::Enum { .. } => "enum",
        }
    }

    /// `self <: other`: every value of `self` is a value of `other`.
    pub fn is_subtype_of(&self, other: &PayloadType) -> bool {
        match (self, other) {
            (Self::Null, Self::Null)
            | (Self::Boolean, Self::Boolean)
            | (Self::Integer, Self::Integer)
            | (Self::Integer, Self::Number)
            | (Self::Number, Self::Number)
            | (Self::String, Self::String) => true,
            (Self::Array { items: sub }, Self::Array { items: sup }) => sub.is_subtype_of(sup),
            (Self::Enum { values: sub }, Self::Enum { values: sup }) => sub.is_subset(sup),
            (Self::Record { fields: sub }, Self::Record { fields: sup }) => {
                sup.iter().all(|(name, want)| match sub.get(name) {
                    Some(have) => {
                        (!want.required || have.required) && have.ty.is_subtype_of(&want.ty)
                    }
                    None => !want.required,
                })
            }
            _ => false,
        }
    }

    /// The record fields, when this is a record.
    pub fn fields(&self) -> Option<&Fields> {
        match self {
            Self::Record { fields } => Some(fields),
            _ => None,
        }
    }

    /// Follows `path` through record fields: the type found and whether every segment on the
    /// way was required.
    pub fn lookup(&self, path: &FieldPath) -> Option<(&PayloadType, bool)> {
        let mut current = self;
        let mut all_required = true;
        for segment in path.segments() {
            let field = current.fields()?.get(segment)?;
            all_required &= field.required;
            current = &field.ty;
        }
        Some((current, all_required))
    }

    /// Paths that every value must define: required non-records, and required records without
    /// required descendants.
    pub fn required_leaf_paths(&self) -> Vec<Vec<FieldName>> {
        let mut out = Vec::new();
        if let Some(fields) = self.fields() {
            collect_required_leaves(fields, &mut Vec::new(), &mut out);
        }
        out
    }

    /// Checks a JSON value against this type; the error names the first mismatch with a
    /// `$`-rooted path.
    pub fn check_value(&self, value: &Value) -> Result<(), ValueMismatch> {
        check(self, value, &mut String::from("$"))
    }

    /// The empty value of a required slot, used to fill root state: `""`, `null`, `[]`, or a
    /// record of the empty values of its required fields. Other kinds have no empty value.
    pub fn empty_value(&self) -> Option<Value> {
        match self {
            Self::String => Some(Value::String(String::new())),
            Self::Null => Some(Value::Null),
            // The reference templates map over an always-empty required array as a no-op.
            Self::Array { .. } => Some(Value::Array(Vec::new())),
            Self::Record { fields } => {
                let mut map = serde_json::Map::new();
                for (name, field) in fields {
                    if field.required {
                        map.insert(name.to_string(), field.ty.empty_value()?);
                    }
                }
                Some(Value::Object(map))
            }
            _ => None,
        }
    }
}

fn collect_required_leaves(
    fields: &Fields,
    prefix: &mut Vec<FieldName>,
    out: &mut Vec<Vec<FieldName>>,
) {
    for (name, field) in fields {
        if !field.required {
            continue;
        }
        prefix.push(name.clone());
        match field.ty.fields() {
            Some(inner) if inner.values().any(|f| f.required) => {
                collect_required_leaves(inner, prefix, out)
            }
            _ => out.push(prefix.clone()),
        }
        prefix.pop();
    }
}

impl RecordField {
    fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(value, at, "RecordField", &["type", "required"])?;
        Ok(Self {
            ty: PayloadType::read(obj.required("type")?, &obj.path("type"))?,
            required: obj.bool("required")?,
        })
    }
}

crate::json::wire_entry_points!(PayloadType);

/// A value that does not match its declared PayloadType.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ValueMismatch(pub String);

fn check(ty: &PayloadType, value: &Value, path: &mut String) -> Result<(), ValueMismatch> {
    // The reference's wording, article included (`$.n must be a integer`).
    let wrong = |path: &str| ValueMismatch(format!("{path} must be a {}", ty.kind_name()));
    match ty {
        PayloadType::Null if value.is_null() => Ok(()),
        PayloadType::Boolean if value.is_boolean() => Ok(()),
        PayloadType::Integer if is_integral(value) => Ok(()),
        PayloadType::Number if value.is_number() => Ok(()),
        PayloadType::String if value.is_string() => Ok(()),
        PayloadType::Enum { values } => match value.as_str() {
            Some(label) if values.contains(label) => Ok(()),
            Some(label) => Err(ValueMismatch(format!(
                "{path} contains unknown enum label {label}"
            ))),
            None => Err(wrong(path)),
        },
        PayloadType::Array { items } => {
            let Some(elements) = value.as_array() else {
                return Err(wrong(path));
            };
            for (i, element) in elements.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                check(items, element, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        PayloadType::Record { fields } => {
            let Some(object) = value.as_object() else {
                return Err(wrong(path));
            };
            // Declared fields first, in name order, then undeclared ones (as the reference).
            for (name, field) in fields {
                match object.get(name.as_str()) {
                    Some(inner) => {
                        let len = path.len();
                        path.push('.');
                        path.push_str(name.as_str());
                        check(&field.ty, inner, path)?;
                        path.truncate(len);
                    }
                    None if field.required => {
                        return Err(ValueMismatch(format!(
                            "{path} is missing required field {name}"
                        )));
                    }
                    None => {}
                }
            }
            match object.keys().find(|k| !fields.contains_key(k.as_str())) {
                Some(extra) => Err(ValueMismatch(format!(
                    "{path} contains undeclared field {extra}"
                ))),
                None => Ok(()),
            }
        }
        _ => Err(wrong(path)),
    }
}

fn is_integral(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64()
                || n.is_u64()
                || n.as_f64()
                    .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
        }
        _ => false,
    }
}

impl fmt::Display for PayloadType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Record { fields } => {
                f.write_str("{")?;
                for (i, (name, field)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    let mark = if field.required { "" } else { "?" };
                    write!(f, "{name}{mark}: {}", field.ty)?;
                }
                f.write_str("}")
            }
            Self::Array { items } => write!(f, "[{items}]"),
            Self::Enum { values } => {
                let labels: Vec<&str> = values.iter().map(|l| l.as_str()).collect();
                write!(f, "enum({})", labels.join("|"))
            }
            scalar => f.write_str(scalar.kind_name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::JsonPath;
    use serde_json::json;

    fn ty(v: Value) -> PayloadType {
        PayloadType::parse(&v, &JsonPath::root()).unwrap()
    }

    #[test]
    fn extra_keys_are_reported_before_unknown_kinds() {
        let err =
            PayloadType::parse(&json!({"kind":"union","anyOf":[]}), &JsonPath::root()).unwrap_err();
        assert!(
            err.message
                .contains("unknown field `anyOf` in payload type `union`")
        );
        let err = PayloadType::parse(&json!({"kind":"union"}), &JsonPath::root()).unwrap_err();
        assert!(
            err.message
                .starts_with("unknown variant `union`, expected one of `null`")
        );
        let err = PayloadType::parse(&json!({"kind":"string","regex":".*"}), &JsonPath::root())
            .unwrap_err();
        assert!(
            err.message
                .contains("unknown field `regex` in payload type `string`")
        );
    }

    #[test]
    fn records_are_width_and_depth_subtypes() {
        let wide = ty(json!({"kind":"record","fields":{
            "a":{"type":{"kind":"integer"},"required":true},
            "b":{"type":{"kind":"string"},"required":true}}}));
        let narrow = ty(json!({"kind":"record","fields":{
            "a":{"type":{"kind":"number"},"required":false}}}));
        assert!(wide.is_subtype_of(&narrow));
        assert!(!narrow.is_subtype_of(&wide));
        assert!(ty(json!({"kind":"integer"})).is_subtype_of(&ty(json!({"kind":"number"}))));
        assert!(!ty(json!({"kind":"number"})).is_subtype_of(&ty(json!({"kind":"integer"}))));
    }

    #[test]
    fn value_checks_name_the_first_mismatch() {
        let t = ty(json!({"kind":"record","fields":{
            "a":{"type":{"kind":"array","items":{"kind":"integer"}},"required":true},
            "v":{"type":{"kind":"enum","values":["x"]},"required":false}}}));
        assert!(t.check_value(&json!({"a":[1, 2.0]})).is_ok());
        assert_eq!(
            t.check_value(&json!({"a":[1, 1.5]})).unwrap_err().0,
            "$.a[1] must be a integer"
        );
        assert_eq!(
            t.check_value(&json!({"y":1})).unwrap_err().0,
            "$ is missing required field a"
        );
        assert_eq!(
            t.check_value(&json!({})).unwrap_err().0,
            "$ is missing required field a"
        );
        assert_eq!(
            t.check_value(&json!({"a":[],"y":1})).unwrap_err().0,
            "$ contains undeclared field y"
        );
        assert_eq!(
            t.check_value(&json!({"a":[],"v":"z"})).unwrap_err().0,
            "$.v contains unknown enum label z"
        );
    }

    #[test]
    fn empty_values_cover_strings_nulls_arrays_and_required_record_fields() {
        let t = ty(json!({"kind":"record","fields":{
            "s":{"type":{"kind":"string"},"required":true},
            "n":{"type":{"kind":"null"},"required":true},
            "l":{"type":{"kind":"array","items":{"kind":"integer"}},"required":true},
            "r":{"type":{"kind":"record","fields":{"x":{"type":{"kind":"string"},"required":true}}},"required":true},
            "o":{"type":{"kind":"string"},"required":false}}}));
        assert_eq!(
            t.empty_value(),
            Some(json!({"s":"","n":null,"l":[],"r":{"x":""}}))
        );
        assert_eq!(ty(json!({"kind":"integer"})).empty_value(), None);
    }

    #[test]
    fn required_leaves_stop_at_records_without_required_fields() {
        let t = ty(json!({"kind":"record","fields":{
            "a":{"type":{"kind":"record","fields":{"b":{"type":{"kind":"string"},"required":true}}},"required":true},
            "c":{"type":{"kind":"record","fields":{"d":{"type":{"kind":"string"},"required":false}}},"required":true},
            "e":{"type":{"kind":"string"},"required":false}}}));
        let leaves: Vec<String> = t
            .required_leaf_paths()
            .iter()
            .map(|p| p.iter().map(|f| f.as_str()).collect::<Vec<_>>().join("."))
            .collect();
        assert_eq!(leaves, vec!["a.b", "c"]);
    }
}
