//! Differential test against the shipping reference (Zeroshot 10.19.1, installed by
//! `scripts/install-zeroshot.sh`): generated graphs — the generator's own families and
//! mutations of the exported templates and public vectors — go through `trellis run
//! --validate-only`'s checks in-process and through `zeroshot run --validate-only`; both must
//! agree on accept/reject and on the first message, except for the deliberate differences in
//! `reference-allowlist.txt`.
//!
//! `TRELLIS_REFERENCE_GRAPHS` sets the corpus size (default 2,000, the CI run) and
//! `TRELLIS_REFERENCE_SEED` its seed; `TRELLIS_REFERENCE_DUMP=DIR` writes every unexplained
//! disagreement there (graph, input, both answers).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};
use trellis_runtime::{
    AdmissionError, AdmitRequest, ConfigSource, GraphSource, InputSource, PlanSource,
};
use trellis_testkit::conformance::{json_files, require};
use trellis_testkit::graphgen::{self, Generated, Settings, WorkerStyle, sample};
use trellis_testkit::reference::{
    OracleCase, Reference, ReferenceError, Stage, Verdict, strip_text_location,
};

/// The uniform agent plan both tools are given.
fn plan() -> Value {
    json!({"harness": "claude", "provider": "anthropic", "model": "claude-sonnet-4-5"})
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Files and a workspace for Trellis's side, like the reference's scratch.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn write(&self, name: &str, value: &Value) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    }
}

/// What `trellis run --validate-only GRAPH --input I --uniform-runtime-config R` tells the
/// user, through the same admission the command calls (`trellis_runtime::admit`): the graph's
/// parse error, its first verifier diagnostic, the input mismatch, or the plan's refusal.
fn trellis_answer(scratch: &Scratch, graph: &Value, input: &Value, plan: &Value) -> Verdict {
    let request = AdmitRequest {
        graph: GraphSource::File(scratch.write("graph.json", graph)),
        input: InputSource::File(scratch.write("input.json", input)),
        plan: PlanSource::Uniform(ConfigSource::File(scratch.write("plan.json", plan))),
        workspace: Some(scratch.dir.path().to_path_buf()),
    };
    let rejected = |stage, message: String| Verdict::Rejected { stage, message };
    match trellis_runtime::admit(request) {
        Ok(_) => Verdict::Valid,
        Err(AdmissionError::Rejected { diagnostics, .. }) => {
            rejected(Stage::Verification, diagnostics[0].message.clone())
        }
        Err(
            AdmissionError::InvalidGraph { error, .. } | AdmissionError::Unparseable { error, .. },
        ) => rejected(Stage::Parse, strip_json_location(&error)),
        Err(AdmissionError::InputMismatch(message)) => rejected(Stage::Input, message),
        Err(AdmissionError::Plan(e)) => rejected(Stage::Admission, e.to_string()),
        Err(AdmissionError::Refused(e)) => rejected(Stage::Admission, e.to_string()),
        Err(AdmissionError::VerifierInternal(message)) => {
            panic!("internal verifier error: {message}")
        }
        Err(other) => rejected(Stage::Other, other.to_string()),
    }
}

/// Drops Trellis's ` at $.path` location (or serde's ` at line L column C`) from a parse
/// error, and the `does not parse: ` of a document that is not JSON.
fn strip_json_location(message: &str) -> String {
    let message = message.strip_prefix("does not parse: ").unwrap_or(message);
    let message = match message.rfind(" at $") {
        Some(at) => &message[..at],
        None => message,
    };
    strip_text_location(message).to_owned()
}

/// One allowlist line: the disagreement classes one deliberate difference shows as, and a
/// message fragment of one side.
#[derive(Debug)]
struct Allowed {
    classes: Vec<String>,
    side: String,
    fragment: String,
}

fn allowlist() -> Vec<Allowed> {
    let text = include_str!("reference-allowlist.txt");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let parts: Vec<&str> = line.splitn(4, '|').map(str::trim).collect();
            assert_eq!(
                parts.len(),
                4,
                "allowlist line needs class | side | fragment | reason: {line}"
            );
            assert!(
                !parts[3].is_empty(),
                "allowlist line without a reason: {line}"
            );
            let classes: Vec<String> = parts[0].split(',').map(|c| c.trim().to_owned()).collect();
            for class in &classes {
                assert!(
                    CLASSES.contains(&class.as_str()),
                    "allowlist line with an unknown class {class:?}: {line}"
                );
            }
            Allowed {
                classes,
                side: parts[1].to_owned(),
                fragment: parts[2].to_owned(),
            }
        })
        .collect()
}

/// The disagreement classes (`runtime-output` lines are the runtime differential's and never
/// match an admission answer).
const CLASSES: [&str; 4] = [
    "trellis-only-reject",
    "reference-only-reject",
    "message-mismatch",
    "runtime-output",
];

/// How the two answers relate.
fn classify(trellis: &Verdict, reference: &Verdict) -> &'static str {
    match (trellis, reference) {
        (Verdict::Valid, Verdict::Valid) => "agree",
        (Verdict::Rejected { .. }, Verdict::Valid) => "trellis-only-reject",
        (Verdict::Valid, Verdict::Rejected { .. }) => "reference-only-reject",
        (Verdict::Rejected { message: a, .. }, Verdict::Rejected { message: b, .. }) => {
            if a == b {
                "agree"
            } else {
                "message-mismatch"
            }
        }
    }
}

/// The allowlist line that explains a disagreement, if any.
fn explained(
    allow: &[Allowed],
    class: &str,
    trellis: &Verdict,
    reference: &Verdict,
) -> Option<usize> {
    allow.iter().position(|a| {
        let message = match a.side.as_str() {
            "trellis" => trellis.message(),
            _ => reference.message(),
        };
        a.classes.iter().any(|c| c == class) && message.is_some_and(|m| m.contains(&a.fragment))
    })
}

/// The seed documents: the exported templates with inputs they admit, and the public
/// verifier vectors made admissible (instructions, one attempt, per-node worker refs).
fn seeds(conformance: &Path) -> Vec<(Value, Value)> {
    let read =
        |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let mut out = Vec::new();
    for file in json_files(&conformance.join("zeroshot-templates")) {
        let graph = read(&file);
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        out.push((graph.clone(), template_input(&name, &graph)));
    }
    for folder in ["positive", "negative"] {
        for file in json_files(&conformance.join("openengine-v1/verifier").join(folder)) {
            let mut graph = read(&file)["graph"].clone();
            admissible(&mut graph["root"]);
            let input = sample(&graph["initialInput"], false);
            out.push((graph, input));
        }
    }
    out
}

/// An input a template's delivery admits (review templates post to an issue or pull request).
fn template_input(name: &str, graph: &Value) -> Value {
    let mut input = sample(&graph["initialInput"], false);
    match name {
        "issue-review" => input["url"] = json!("https://github.com/example/scratch/issues/1"),
        "pr-review" => {
            input["url"] = json!("https://github.com/example/scratch/pull/1");
            let revision = |c: char| c.to_string().repeat(40);
            input["context"]["reviewScope"] = json!({
                "baseBranch": "main", "baseRepository": "example/scratch",
                "baseRevision": revision('a'), "headBranch": "topic",
                "headRepository": "example/scratch", "headRevision": revision('b')});
        }
        _ => {}
    }
    input
}

/// Gives every executable instructions, one attempt and a worker reference of its own.
fn admissible(node: &mut Value) {
    match node {
        Value::Object(map) => {
            if matches!(
                map.get("kind").and_then(Value::as_str),
                Some("step" | "verifier")
            ) && let Some(name) = map.get("name").and_then(Value::as_str).map(str::to_owned)
            {
                map.insert(
                    "instructions".into(),
                    json!(format!("Do the work of {name}.")),
                );
                map.insert("attempts".into(), json!(1));
                map.insert("worker".into(), json!(format!("command.{name}@1")));
            }
            map.values_mut().for_each(admissible);
        }
        Value::Array(items) => items.iter_mut().for_each(admissible),
        _ => {}
    }
}

fn dump(
    dir: &Path,
    kind: &str,
    i: usize,
    case: &Generated,
    trellis: &Verdict,
    reference: &Verdict,
) {
    let _ = std::fs::create_dir_all(dir);
    let record = json!({"families": case.families, "trellis": format!("{trellis:?}"),
                        "reference": format!("{reference:?}"), "input": case.input,
                        "graph": case.graph});
    let _ = std::fs::write(
        dir.join(format!("{kind}-{i:05}.json")),
        serde_json::to_string_pretty(&record).unwrap_or_default(),
    );
}

/// The cases to compare with their corpus indices: all, or those `TRELLIS_REFERENCE_CASES`
/// lists.
fn selected_cases(corpus: &[Generated]) -> Vec<(usize, &Generated)> {
    let wanted: Option<Vec<usize>> = std::env::var("TRELLIS_REFERENCE_CASES").ok().map(|list| {
        list.split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .expect("TRELLIS_REFERENCE_CASES lists case numbers")
            })
            .collect()
    });
    corpus
        .iter()
        .enumerate()
        .filter(|(i, _)| wanted.as_ref().is_none_or(|w| w.contains(i)))
        .collect()
}

#[test]
fn trellis_agrees_with_the_reference_on_generated_graphs() {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let Some(reference) = Reference::locate(manifest).unwrap_or_else(|e| panic!("{e}")) else {
        return;
    };
    let Some(conformance) = require(manifest).unwrap_or_else(|e| panic!("{e}")) else {
        return;
    };
    let started = Instant::now();
    let settings = Settings {
        seed: env_number("TRELLIS_REFERENCE_SEED", 13),
        count: env_number("TRELLIS_REFERENCE_GRAPHS", 2000) as usize,
        workers: WorkerStyle::Mixed,
        heavy: std::env::var_os("TRELLIS_REFERENCE_HEAVY").is_some(),
        seeds: seeds(&conformance),
    };
    let corpus = graphgen::corpus(&settings);
    let selected = selected_cases(&corpus);
    let cases: Vec<OracleCase> = selected
        .iter()
        .map(|(_, c)| OracleCase {
            graph: c.graph.clone(),
            input: c.input.clone(),
            plan: plan(),
        })
        .collect();
    let generated = started.elapsed();
    let answers = reference.check_all(&cases, 2);
    let scratch = Scratch::new();
    let referenced = started.elapsed() - generated;
    let mut slowest: Vec<(f64, usize)> = Vec::new();
    let allow = allowlist();
    let dump_dir = std::env::var_os("TRELLIS_REFERENCE_DUMP").map(PathBuf::from);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut allowed = 0usize;
    let mut allowed_by_line: BTreeMap<&str, usize> = BTreeMap::new();
    let mut unexplained: Vec<String> = Vec::new();
    let mut by_family: BTreeMap<String, usize> = BTreeMap::new();
    let mut reference_valid = 0usize;
    let mut slowest_reference: Vec<(f64, usize)> = Vec::new();
    let mut reference_messages: BTreeMap<String, usize> = BTreeMap::new();
    let mut timed_out: Vec<usize> = Vec::new();
    for (&(i, case), (answer, took)) in selected.iter().zip(answers) {
        slowest_reference.push((took.as_secs_f64(), i));
        let reference_answer = match answer {
            Ok(answer) => answer,
            Err(ReferenceError::TimedOut(_)) => {
                timed_out.push(i);
                continue;
            }
            Err(e) => panic!("case {i}: {e}"),
        };
        let clock = Instant::now();
        let trellis = trellis_answer(&scratch, &case.graph, &case.input, &plan());
        slowest.push((clock.elapsed().as_secs_f64(), i));
        reference_valid += usize::from(reference_answer.is_valid());
        *reference_messages
            .entry(reference_answer.message().unwrap_or("(valid)").to_owned())
            .or_default() += 1;
        if let Some(dir) = dump_dir.as_ref().filter(|_| took.as_secs_f64() > 2.0) {
            dump(dir, "slow", i, case, &trellis, &reference_answer);
        }
        let class = classify(&trellis, &reference_answer);
        *counts.entry(class).or_default() += 1;
        if class == "agree" {
            continue;
        }
        if let Some(line) = explained(&allow, class, &trellis, &reference_answer) {
            allowed += 1;
            *allowed_by_line.entry(&allow[line].fragment).or_default() += 1;
            continue;
        }
        for family in &case.families {
            *by_family.entry(family.clone()).or_default() += 1;
        }
        if let Some(dir) = &dump_dir {
            dump(dir, "case", i, case, &trellis, &reference_answer);
        }
        if unexplained.len() < 12 {
            unexplained.push(format!(
                "case {i} [{}]: {class}\n  trellis   {trellis:?}\n  reference {reference_answer:?}",
                case.families.join(", ")
            ));
        }
    }
    for (side, list) in [
        ("trellis", &mut slowest),
        ("reference", &mut slowest_reference),
    ] {
        list.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (seconds, i) in list.iter().take(5) {
            println!(
                "slow {side} case {i}: {seconds:.2} s [{}]",
                corpus[*i].families.join(", ")
            );
        }
    }
    let mut buckets = [0usize; 5];
    for (seconds, _) in &slowest_reference {
        let bucket = [0.1, 0.5, 2.0, 5.0].iter().filter(|b| seconds > *b).count();
        buckets[bucket] += 1;
    }
    println!(
        "reference times: <0.1 s {}, <0.5 s {}, <2 s {}, <5 s {}, more {}",
        buckets[0], buckets[1], buckets[2], buckets[3], buckets[4]
    );
    println!(
        "generation {:.1} s, reference {:.1} s",
        generated.as_secs_f64(),
        referenced.as_secs_f64()
    );
    let mut top: Vec<(&String, &usize)> = reference_messages.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    // TRELLIS_REFERENCE_MESSAGES=1 lists every first message (to see which rules are thin).
    let listed = match std::env::var_os("TRELLIS_REFERENCE_MESSAGES") {
        Some(_) => top.len(),
        None => 15,
    };
    for (message, n) in top.iter().take(listed) {
        println!("  reference {n:>5}  {message}");
    }
    let count = |class: &str| counts.get(class).copied().unwrap_or(0);
    println!(
        "{} graphs, agree {}, trellis-only-reject {}, reference-only-reject {}, message-mismatch {} \
         ({allowed} disagreements allowlisted; reference admits {reference_valid}; {} over the \
         reference's deadline, not compared; {:.1} s)",
        selected.len() - timed_out.len(),
        count("agree"),
        count("trellis-only-reject"),
        count("reference-only-reject"),
        count("message-mismatch"),
        timed_out.len(),
        started.elapsed().as_secs_f64()
    );
    for (fragment, n) in &allowed_by_line {
        println!("  allowlisted {n:>5}  {fragment}");
    }
    assert!(
        timed_out.len() * 50 <= selected.len(),
        "the reference timed out on {} of {} graphs: {timed_out:?}",
        timed_out.len(),
        selected.len()
    );
    let total_unexplained = counts.values().sum::<usize>() - count("agree") - allowed;
    assert!(
        total_unexplained == 0,
        "{total_unexplained} unexplained disagreements (by family: {by_family:?}):\n{}",
        unexplained.join("\n")
    );
    assert!(
        selected.len() < 100 || reference_valid * 10 >= selected.len(),
        "the corpus is almost all rejections"
    );
}

#[test]
fn the_exported_templates_are_admitted_by_both() {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let Some(conformance) = require(manifest).unwrap_or_else(|e| panic!("{e}")) else {
        return;
    };
    let reference = Reference::locate(manifest).unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    for file in json_files(&conformance.join("zeroshot-templates")) {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let graph: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let input = template_input(&name, &graph);
        assert_eq!(
            trellis_answer(&scratch, &graph, &input, &plan()),
            Verdict::Valid,
            "{name}"
        );
        if let Some(reference) = &reference {
            let case = OracleCase {
                graph,
                input,
                plan: plan(),
            };
            assert_eq!(reference.check(&case, 0).unwrap(), Verdict::Valid, "{name}");
        }
    }
}

/// Our own research templates (not exported by the reference: the full protocol of issue 37)
/// are admitted by both tools under an agent plan, with and without push.
#[test]
fn the_research_templates_are_admitted_by_both() {
    let manifest = env!("CARGO_MANIFEST_DIR");
    // These graphs are large: the reference takes seconds on each, more on a loaded machine.
    let reference = Reference::locate(manifest)
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|r| r.with_deadline(std::time::Duration::from_secs(180)));
    let scratch = Scratch::new();
    let templates = Path::new(manifest).join("../../templates");
    for name in ["auto-research", "auto-research-push"] {
        let text = std::fs::read_to_string(templates.join(format!("{name}.json"))).unwrap();
        let graph: Value = serde_json::from_str(&text).unwrap();
        let input = json!({"task": "Does caching help?", "options": {"iterations": 2}});
        assert_eq!(
            trellis_answer(&scratch, &graph, &input, &plan()),
            Verdict::Valid,
            "{name}"
        );
        if let Some(reference) = &reference {
            let case = OracleCase {
                graph,
                input,
                plan: plan(),
            };
            let verdict = reference
                .check(&case, 0)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(verdict, Verdict::Valid, "{name}");
        }
    }
}
