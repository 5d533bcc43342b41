//! Skill bundles: folders with a `SKILL.md` whose frontmatter declares exit conditions, a
//! streaming contract, canonical scripts and a tool bundle; the registry the validator's S4 and
//! SK1–SK4 rules and the executor's synthetic `gap_skills.*` packages read.

use indexmap::IndexMap;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Largest `SKILL.md` read (frontmatter plus body).
pub const MAX_SKILL_MD_BYTES: u64 = 1024 * 1024;
/// Longest bundle name (Agent Skills limit).
pub const MAX_SKILL_NAME_CHARS: usize = 64;
/// Longest description (Agent Skills limit).
pub const MAX_SKILL_DESCRIPTION_CHARS: usize = 1024;
/// Most bundles one registry holds.
pub const MAX_SKILL_BUNDLES: usize = 4096;

/// Extension keys that belong under `gap:`; at the top level they are a migration error.
const GAP_ONLY_KEYS: [&str; 16] = [
    "allowed_tools",
    "allowed-tools",
    "exit_conditions",
    "produces_outputs",
    "required_inputs",
    "canonical_scripts",
    "prompts",
    "references",
    "examples",
    "errors",
    "tips",
    "hard_rules",
    "streaming",
    "tools",
    "requires",
    "serving",
];
/// Frontmatter keys of the retired dev-tree layout.
const REMOVED_KEYS: [&str; 6] = [
    "runtime", "shape", "composes", "category", "tags", "contract",
];

/// Why a bundle or a registry could not be loaded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SkillError {
    #[error("cannot read {path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "skill bundle name collision: '{name}' is registered from {first} and again from {second}"
    )]
    Collision {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("skill registry {path} is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("more than {MAX_SKILL_BUNDLES} skill bundles")]
    TooMany,
}

/// Which bundle root a bundle came from; also the synthetic package segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleKind {
    /// `tools/<bundle>`: model-backed callables.
    Tool,
    /// `skills/<bundle>`: strategies with canonical scripts (also the default layout).
    Skill,
}

impl BundleKind {
    /// `tools` / `skills`: the folder name and `gap_skills.<namespace>` segment.
    pub fn namespace(self) -> &'static str {
        match self {
            BundleKind::Tool => "tools",
            BundleKind::Skill => "skills",
        }
    }
}

/// A script a subgraph may run as the bundle's own (`gap.canonical_scripts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalScript {
    /// Logical name.
    pub name: String,
    /// Path relative to the bundle directory.
    pub path: String,
}

impl CanonicalScript {
    /// The script's file name, which script nodes are matched on (SK2).
    pub fn file_name(&self) -> &str {
        self.path.rsplit(['/', '\\']).next().unwrap_or(&self.path)
    }
}

/// One parsed bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillBundle {
    pub name: String,
    pub kind: BundleKind,
    pub dir: PathBuf,
    pub description: String,
    /// `gap.exit_conditions`: exit name to meaning, in declaration order.
    pub exit_conditions: IndexMap<String, String>,
    /// `gap.streaming`: the bundle's callable publishes through `ctx.publish` (S4).
    pub streaming: bool,
    pub canonical_scripts: Vec<CanonicalScript>,
    pub allowed_tools: Vec<String>,
    /// `gap.tools`: tool name to summary; each names a `@tool` function of `tools.py`.
    pub tools: IndexMap<String, String>,
    /// `gap.prompts`: logical prompt name to bundle-relative path (`load_prompt`).
    pub prompts: IndexMap<String, String>,
    pub required_inputs: IndexMap<String, String>,
    pub produces_outputs: IndexMap<String, String>,
}

impl SkillBundle {
    /// An empty bundle named `name` (tests and programmatic registries).
    pub fn new(name: impl Into<String>) -> Self {
        SkillBundle {
            name: name.into(),
            kind: BundleKind::Skill,
            dir: PathBuf::new(),
            description: String::new(),
            exit_conditions: IndexMap::new(),
            streaming: false,
            canonical_scripts: Vec::new(),
            allowed_tools: Vec::new(),
            tools: IndexMap::new(),
            prompts: IndexMap::new(),
            required_inputs: IndexMap::new(),
            produces_outputs: IndexMap::new(),
        }
    }

    /// Sets the streaming contract.
    pub fn with_streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// Sets the exit conditions (meanings left empty).
    pub fn with_exit_conditions(mut self, exits: &[&str]) -> Self {
        self.exit_conditions = exits
            .iter()
            .map(|e| (e.to_string(), String::new()))
            .collect();
        self
    }

    /// `gap_skills.<namespace>.<name>`: the synthetic package of the bundle.
    pub fn package(&self) -> String {
        format!("gap_skills.{}.{}", self.kind.namespace(), self.name)
    }

    /// The canonical script whose file name is `file_name`.
    pub fn canonical_by_file(&self, file_name: &str) -> Option<&CanonicalScript> {
        self.canonical_scripts
            .iter()
            .find(|c| c.file_name() == file_name)
    }

    /// Reads and checks `<dir>/SKILL.md`; `name` must equal the directory name.
    pub fn load(dir: &Path, kind: BundleKind) -> Result<SkillBundle, SkillError> {
        let path = dir.join("SKILL.md");
        let io = |e: std::io::Error| SkillError::Io {
            path: path.clone(),
            message: e.to_string(),
        };
        let size = std::fs::metadata(&path).map_err(io)?.len();
        if size > MAX_SKILL_MD_BYTES {
            return Err(SkillError::Invalid {
                path,
                message: format!("larger than {MAX_SKILL_MD_BYTES} bytes"),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(io)?;
        let bundle = parse_skill_md(&text, dir, kind).map_err(|message| SkillError::Invalid {
            path: path.clone(),
            message,
        })?;
        for script in &bundle.canonical_scripts {
            if !dir.join(&script.path).is_file() {
                return Err(SkillError::Invalid {
                    path,
                    message: format!(
                        "canonical script '{}' is declared at {}, but the file is missing",
                        script.name, script.path
                    ),
                });
            }
        }
        Ok(bundle)
    }
}

/// Splits `---` frontmatter from the body and builds the bundle (no file checks).
pub fn parse_skill_md(text: &str, dir: &Path, kind: BundleKind) -> Result<SkillBundle, String> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("---") {
        return Err("SKILL.md must begin with a `---` frontmatter delimiter".into());
    }
    let mut frontmatter = Vec::new();
    let mut closed = false;
    for line in lines {
        if line.trim() == "---" {
            closed = true;
            break;
        }
        frontmatter.push(line);
    }
    if !closed {
        return Err("SKILL.md frontmatter is missing its closing `---`".into());
    }
    let data: Value = serde_yaml_ng::from_str(&frontmatter.join("\n"))
        .map_err(|e| format!("frontmatter is not valid YAML: {e}"))?;
    let data = match data {
        Value::Null => Map::new(),
        Value::Object(map) => map,
        _ => return Err("frontmatter must be a YAML mapping".into()),
    };
    bundle_from_frontmatter(&data, dir, kind)
}

fn bundle_from_frontmatter(
    data: &Map<String, Value>,
    dir: &Path,
    kind: BundleKind,
) -> Result<SkillBundle, String> {
    let sorted = |keys: &[&str]| {
        let mut found: Vec<&str> = data
            .keys()
            .map(String::as_str)
            .filter(|k| keys.contains(k))
            .collect();
        found.sort_unstable();
        found
    };
    let removed = sorted(&REMOVED_KEYS);
    if !removed.is_empty() {
        return Err(format!(
            "uses removed frontmatter keys {removed:?}: the tools/ vs skills/ folder conveys the kind, \
             and category/tags move under `metadata:`"
        ));
    }
    let misplaced = sorted(&GAP_ONLY_KEYS);
    if !misplaced.is_empty() {
        return Err(format!(
            "has gap extension keys {misplaced:?} at the top level; nest them under `gap:`"
        ));
    }
    let name = data.get("name").map(scalar_text).unwrap_or_default();
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.is_empty() {
        return Err("has no `name` field".into());
    }
    if name != dir_name {
        return Err(format!(
            "declares name '{name}', which must equal its bundle directory name '{dir_name}'"
        ));
    }
    if name.chars().count() > MAX_SKILL_NAME_CHARS || !valid_bundle_name(&name) {
        return Err(format!(
            "`name: {name}` is not a valid bundle name (at most {MAX_SKILL_NAME_CHARS} chars, \
             lowercase letters/digits separated by single hyphens)"
        ));
    }
    let description = data.get("description").map(scalar_text).unwrap_or_default();
    if description.is_empty() {
        return Err("has no `description` field".into());
    }
    if description.chars().count() > MAX_SKILL_DESCRIPTION_CHARS {
        return Err(format!(
            "`description` is {} chars; the limit is {MAX_SKILL_DESCRIPTION_CHARS}",
            description.chars().count()
        ));
    }
    if !matches!(
        data.get("metadata"),
        None | Some(Value::Null | Value::Object(_))
    ) {
        return Err("metadata must be a mapping".into());
    }
    let empty = Map::new();
    let gap = match data.get("gap") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(_) => return Err("the `gap:` key must be a mapping".into()),
    };
    Ok(SkillBundle {
        name,
        kind,
        dir: dir.to_path_buf(),
        description,
        exit_conditions: text_map(gap.get("exit_conditions"), "gap.exit_conditions")?,
        streaming: gap.get("streaming").is_some_and(truthy),
        canonical_scripts: named_entries(gap.get("canonical_scripts"), "gap.canonical_scripts")?
            .into_iter()
            .map(|(name, path)| CanonicalScript { name, path })
            .collect(),
        allowed_tools: text_list(gap.get("allowed_tools"), "gap.allowed_tools")?,
        tools: named_entries(gap.get("tools"), "gap.tools")?
            .into_iter()
            .collect(),
        prompts: text_map(gap.get("prompts"), "gap.prompts")?,
        required_inputs: text_map(gap.get("required_inputs"), "gap.required_inputs")?,
        produces_outputs: text_map(gap.get("produces_outputs"), "gap.produces_outputs")?,
    })
}

fn valid_bundle_name(name: &str) -> bool {
    name.split('-').all(|part| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    })
}

/// YAML scalars as Python's `str()` would print the common cases.
fn scalar_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        other => other.to_string(),
    }
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn text_map(value: Option<&Value>, field: &str) -> Result<IndexMap<String, String>, String> {
    match value {
        None | Some(Value::Null) => Ok(IndexMap::new()),
        Some(Value::Object(map)) => Ok(map
            .iter()
            .map(|(k, v)| (k.clone(), scalar_text(v)))
            .collect()),
        Some(_) => Err(format!("{field} must be a mapping")),
    }
}

fn text_list(value: Option<&Value>, field: &str) -> Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(items)) => Ok(items.iter().map(scalar_text).collect()),
        Some(_) => Err(format!("{field} must be a list of strings")),
    }
}

/// `[{name: value}, …]`, `[{name:…, path|summary:…}, …]` or `{name: value, …}`.
fn named_entries(value: Option<&Value>, field: &str) -> Result<Vec<(String, String)>, String> {
    let pair = |entry: &Value| -> Option<(String, String)> {
        let map = entry.as_object()?;
        if map.len() == 1 {
            let (k, v) = map.iter().next()?;
            return Some((k.clone(), scalar_text(v)));
        }
        let name = map.get("name")?;
        let other = map.get("path").or_else(|| map.get("summary"));
        Some((
            scalar_text(name),
            other.map(scalar_text).unwrap_or_default(),
        ))
    };
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => Ok(map
            .iter()
            .map(|(k, v)| (k.clone(), scalar_text(v)))
            .collect()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|entry| {
                pair(entry).ok_or_else(|| {
                    format!("{field} entry must map a single name to a value, got {entry}")
                })
            })
            .collect(),
        Some(_) => Err(format!("{field} must be a list or a mapping")),
    }
}

/// Bundles by name, in discovery order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkillRegistry {
    bundles: IndexMap<String, SkillBundle>,
}

impl SkillRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a bundle; a taken name is a collision.
    pub fn insert(&mut self, bundle: SkillBundle) -> Result<(), SkillError> {
        if let Some(first) = self.bundles.get(&bundle.name) {
            return Err(SkillError::Collision {
                name: bundle.name.clone(),
                first: first.dir.clone(),
                second: bundle.dir,
            });
        }
        if self.bundles.len() >= MAX_SKILL_BUNDLES {
            return Err(SkillError::TooMany);
        }
        self.bundles.insert(bundle.name.clone(), bundle);
        Ok(())
    }

    /// Loads every bundle under `root`: `root` itself when it holds a `SKILL.md`; else its
    /// `tools/` and `skills/` roots when present (an open-robot-skills checkout); else each
    /// immediate subdirectory with a `SKILL.md` (one folder per skill). Folders starting with
    /// `_` are skipped; entries are read in name order.
    pub fn load_dir(&mut self, root: &Path) -> Result<(), SkillError> {
        if !root.is_dir() {
            return Err(SkillError::NotADirectory {
                path: root.to_path_buf(),
            });
        }
        if root.join("SKILL.md").is_file() {
            return self.insert(SkillBundle::load(root, BundleKind::Skill)?);
        }
        let roots: Vec<(BundleKind, PathBuf)> = [BundleKind::Tool, BundleKind::Skill]
            .into_iter()
            .map(|kind| (kind, root.join(kind.namespace())))
            .filter(|(_, dir)| dir.is_dir())
            .collect();
        if roots.is_empty() {
            return self.discover(root, BundleKind::Skill);
        }
        for (kind, dir) in roots {
            self.discover(&dir, kind)?;
        }
        Ok(())
    }

    fn discover(&mut self, dir: &Path, kind: BundleKind) -> Result<(), SkillError> {
        let io = |e: std::io::Error| SkillError::Io {
            path: dir.to_path_buf(),
            message: e.to_string(),
        };
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir() && p.join("SKILL.md").is_file())
            .filter(|p| {
                !p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('_'))
            })
            .collect();
        entries.sort();
        for entry in entries {
            self.insert(SkillBundle::load(&entry, kind)?)?;
        }
        Ok(())
    }

    /// The bundle named `name`.
    pub fn get(&self, name: &str) -> Option<&SkillBundle> {
        self.bundles.get(name)
    }

    /// True when a bundle is named `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.bundles.contains_key(name)
    }

    /// Every bundle, in discovery order.
    pub fn bundles(&self) -> impl Iterator<Item = &SkillBundle> {
        self.bundles.values()
    }

    /// Number of bundles.
    pub fn len(&self) -> usize {
        self.bundles.len()
    }

    /// True without bundles.
    pub fn is_empty(&self) -> bool {
        self.bundles.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKILL: &str = "---\nname: test-mating-sk\ndescription: Execute a plan.\n\
        metadata: {category: testing}\ngap:\n  exit_conditions:\n    seated: done\n    blocked: refused\n\
        \x20 canonical_scripts:\n    - execute: scripts/execute.py\n  streaming: false\n\
        \x20 tools: [{sk.probe: probes}]\n  prompts: {greet: prompts/greet.md}\n---\n# body\n";

    #[test]
    fn parses_the_gap_extension_block() {
        let dir = Path::new("/x/test-mating-sk");
        let bundle = parse_skill_md(SKILL, dir, BundleKind::Skill).unwrap();
        assert_eq!(
            bundle.exit_conditions.keys().collect::<Vec<_>>(),
            ["seated", "blocked"]
        );
        assert_eq!(bundle.canonical_scripts[0].file_name(), "execute.py");
        assert_eq!(
            bundle.tools.get("sk.probe").map(String::as_str),
            Some("probes")
        );
        assert_eq!(bundle.package(), "gap_skills.skills.test-mating-sk");
        assert!(!bundle.streaming);
    }

    #[test]
    fn rejects_mismatched_names_and_misplaced_keys() {
        let other = Path::new("/x/other");
        let err = parse_skill_md(SKILL, other, BundleKind::Skill).unwrap_err();
        assert!(
            err.contains("must equal its bundle directory name 'other'"),
            "{err}"
        );
        let misplaced = "---\nname: a\ndescription: d\nstreaming: true\n---\n";
        let err = parse_skill_md(misplaced, Path::new("/a"), BundleKind::Skill).unwrap_err();
        assert!(err.contains("[\"streaming\"] at the top level"), "{err}");
        let unclosed = "---\nname: a\n";
        assert!(parse_skill_md(unclosed, Path::new("/a"), BundleKind::Skill).is_err());
        let bad_name = "---\nname: Bad_Name\ndescription: d\n---\n";
        let err = parse_skill_md(bad_name, Path::new("/Bad_Name"), BundleKind::Skill).unwrap_err();
        assert!(err.contains("not a valid bundle name"), "{err}");
    }
}
