//! Canonical JSON text (object keys sorted, no whitespace) and the SHA-256 digests built on it.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The canonical text of `value`: objects with keys in byte order, arrays in order, no
/// insignificant whitespace, strings and numbers as serde_json writes them. Two values that
/// are equal as JSON always have the same canonical text, whatever their key order.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Lowercase hex SHA-256 of the canonical text of `value`.
pub fn canonical_digest(value: &Value) -> String {
    sha256_hex(canonical_json(value).as_bytes())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn key_order_does_not_change_the_canonical_text() {
        let a = json!({"b": [1, {"y": 2, "x": "é"}], "a": null});
        let b: Value = serde_json::from_str(r#"{"a":null,"b":[1,{"x":"é","y":2}]}"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":null,"b":[1,{"x":"é","y":2}]}"#);
        assert_eq!(canonical_digest(&a), canonical_digest(&b));
        assert_ne!(canonical_digest(&a), canonical_digest(&json!({"a": null})));
    }

    #[test]
    fn digests_are_lowercase_sha256_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
