//! Property tests: identity invariances and sensitivities, the direct canonical writer against
//! a value-based reference, PayloadType subtyping laws, and wire round-trips of generated
//! graphs.

mod support;

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::TestRng;
use serde_json::{Map, Value};
use support::arb::{graph_spec, graph_value, payload_type};
use trellis_graph::json::JsonPath;
use trellis_graph::{
    CompiledGraphIr, GraphSpec, PayloadType, PositiveInteger, StructuralBounds, TerminationWitness,
};
use trellis_verify::{canonical_bytes, graph_identity};

fn ir(spec: GraphSpec) -> CompiledGraphIr {
    let one = PositiveInteger::new(1).unwrap();
    CompiledGraphIr::from_spec(
        spec,
        StructuralBounds {
            termination: TerminationWitness::Acyclic {
                order: vec![trellis_graph::NodeName::new("n0").unwrap()],
            },
            max_node_executions: one,
            peak_concurrency: one,
            attempts_per_node: BTreeMap::new(),
        },
    )
}

fn below(rng: &mut TestRng, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

fn chance(rng: &mut TestRng, percent: u64) -> bool {
    rng.next_u64() % 100 < percent
}

fn shuffle<T>(items: &mut [T], rng: &mut TestRng) {
    for i in (1..items.len()).rev() {
        let j = below(rng, i + 1);
        items.swap(i, j);
    }
}

fn parse(value: &Value) -> GraphSpec {
    GraphSpec::parse(value, &JsonPath::root()).unwrap_or_else(|e| panic!("{e}"))
}

/// Reorders everything the identity must ignore: object keys, enum labels, bindings,
/// promoted paths, par branches, all/any operands and k_of_n selectors.
fn shuffle_insensitive(value: &mut Value, rng: &mut TestRng) {
    match value {
        Value::Object(map) => {
            let kind = map
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let has_state = map.contains_key("state");
            for (key, child) in map.iter_mut() {
                let permute = matches!(
                    key.as_str(),
                    "inputBindings"
                        | "writeBindings"
                        | "bindings"
                        | "promotedStatePaths"
                        | "labels"
                ) || (key == "branches" && kind == "par")
                    || (key == "guards" && (kind == "all" || kind == "any"))
                    || (key == "values" && (kind == "k_of_n" || kind == "enum"));
                if let (true, Value::Array(items)) =
                    (permute && (key != "branches" || has_state), &mut *child)
                {
                    shuffle(items, rng);
                }
                shuffle_insensitive(child, rng);
            }
            let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
            shuffle(&mut entries, rng);
            *map = entries.into_iter().collect::<Map<String, Value>>();
        }
        Value::Array(items) => items.iter_mut().for_each(|v| shuffle_insensitive(v, rng)),
        _ => {}
    }
}

/// Swaps the first two children of the first sequence with at least two; false if none.
fn swap_seq_children(value: &mut Value) -> bool {
    match value {
        Value::Object(map) => {
            if map.get("kind").and_then(Value::as_str) == Some("seq")
                && let Some(Value::Array(children)) = map.get_mut("children")
                && children.len() >= 2
            {
                children.swap(0, 1);
                return true;
            }
            map.values_mut().any(swap_seq_children)
        }
        Value::Array(items) => items.iter_mut().any(swap_seq_children),
        _ => false,
    }
}

/// A supertype of `ty`, widened at random (integer→number, required→optional, fewer fields,
/// more labels, recursively).
fn widen(ty: &PayloadType, rng: &mut TestRng) -> PayloadType {
    match ty {
        PayloadType::Integer if chance(rng, 50) => PayloadType::Number,
        PayloadType::Array { items } => PayloadType::Array {
            items: Box::new(widen(items, rng)),
        },
        PayloadType::Enum { values } => {
            let mut labels: Vec<_> = values.iter().cloned().collect();
            if chance(rng, 50) {
                let extra = trellis_graph::EnumLabel::new("widened").unwrap();
                if !labels.contains(&extra) {
                    labels.push(extra);
                }
            }
            PayloadType::Enum {
                values: trellis_graph::EnumSet::new(labels).unwrap(),
            }
        }
        PayloadType::Record { fields } => {
            let mut out = trellis_graph::Fields::new();
            for (name, field) in fields {
                let drop = !field.required && chance(rng, 30);
                if !drop {
                    out.insert(
                        name.clone(),
                        trellis_graph::RecordField {
                            ty: widen(&field.ty, rng),
                            required: field.required && chance(rng, 70),
                        },
                    );
                }
            }
            PayloadType::Record { fields: out }
        }
        other => other.clone(),
    }
}

/// Whether every record level of `b` keeps every field `a` has there.
fn keeps_fields(a: &PayloadType, b: &PayloadType) -> bool {
    match (a, b) {
        (PayloadType::Record { fields: fa }, PayloadType::Record { fields: fb }) => fa
            .iter()
            .all(|(name, f)| fb.get(name).is_some_and(|g| keeps_fields(&f.ty, &g.ty))),
        (PayloadType::Array { items: ia }, PayloadType::Array { items: ib }) => {
            keeps_fields(ia, ib)
        }
        _ => true,
    }
}

/// The contract's record rule (§5) lets a subtype carry extra fields and a supertype declare
/// optional fields the subtype lacks, so an optional field can change type through a middle
/// type that omits it: {r?: null} <: {} <: {r?: boolean}, yet {r?: null} is not a subtype of
/// {r?: boolean}. The verifier implements the rule as specified; this pins that behaviour.
#[test]
fn optional_fields_break_transitivity() {
    let ty = |v: serde_json::Value| PayloadType::parse(&v, &JsonPath::root()).unwrap();
    let a = ty(
        serde_json::json!({"kind": "record", "fields": {"r": {"type": {"kind": "null"}, "required": false}}}),
    );
    let b = ty(serde_json::json!({"kind": "record", "fields": {}}));
    let c = ty(
        serde_json::json!({"kind": "record", "fields": {"r": {"type": {"kind": "boolean"}, "required": false}}}),
    );
    assert!(a.is_subtype_of(&b) && b.is_subtype_of(&c));
    assert!(!a.is_subtype_of(&c));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn generated_graphs_round_trip_through_the_wire(value in graph_value()) {
        let spec = parse(&value);
        let written = spec.to_value();
        let again = parse(&written);
        prop_assert_eq!(&again, &spec);
        prop_assert_eq!(again.to_value(), written);
    }

    #[test]
    fn identity_ignores_every_order_the_contract_ignores(value in graph_value(), seed in any::<u64>()) {
        let mut rng = TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &seed.to_le_bytes().repeat(4));
        let mut shuffled = value.clone();
        shuffle_insensitive(&mut shuffled, &mut rng);
        let a = graph_identity(&ir(parse(&value))).unwrap();
        let b = graph_identity(&ir(parse(&shuffled))).unwrap();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn identity_follows_sequence_order(value in graph_value()) {
        // Wrap the generated root so that a sequence with two children always exists.
        let mut value = value;
        let root = value["root"].take();
        value["root"] = serde_json::json!({"kind": "seq", "name": "wrapRoot", "state": {"kind": "null"},
            "promotedStatePaths": [], "children": [root, {"kind": "fail", "name": "wrapTail", "reason": "x"}]});
        let mut swapped = value.clone();
        prop_assert!(swap_seq_children(&mut swapped));
        let a = graph_identity(&ir(parse(&value))).unwrap();
        let b = graph_identity(&ir(parse(&swapped))).unwrap();
        prop_assert_ne!(a, b);
    }

    #[test]
    fn direct_canonical_bytes_match_the_value_based_reference(spec in graph_spec()) {
        let ir = ir(spec);
        let direct = canonical_bytes(&ir).unwrap();
        let reference = support::reference_canonical::canonical_bytes_via_value(&ir).unwrap();
        prop_assert_eq!(String::from_utf8_lossy(&direct), String::from_utf8_lossy(&reference));
    }

    #[test]
    fn subtyping_is_reflexive(ty in payload_type()) {
        prop_assert!(ty.is_subtype_of(&ty));
    }

    #[test]
    fn subtyping_is_transitive_along_widenings(ty in payload_type(), seed in any::<u64>()) {
        let mut rng = TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &seed.to_le_bytes().repeat(4));
        let wider = widen(&ty, &mut rng);
        let widest = widen(&wider, &mut rng);
        prop_assert!(ty.is_subtype_of(&wider));
        prop_assert!(wider.is_subtype_of(&widest));
        prop_assert!(ty.is_subtype_of(&widest));
    }

    /// Transitivity holds whenever the middle type does not forget a field the left one has
    /// (see `optional_fields_break_transitivity` for why that condition is needed).
    #[test]
    fn subtyping_is_transitive_on_arbitrary_triples(a in payload_type(), b in payload_type(), c in payload_type()) {
        if a.is_subtype_of(&b) && b.is_subtype_of(&c) && keeps_fields(&a, &b) {
            prop_assert!(a.is_subtype_of(&c));
        }
    }
}
