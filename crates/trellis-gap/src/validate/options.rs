//! What a validation is given: the optional registries, the script introspector (the
//! validator's Python side) with what it reports, and the per-validation cache of its reports.

use crate::skills::SkillRegistry;
use crate::tools::ToolRegistry;
use std::collections::HashMap;
use std::path::Path;

/// The `run()` parameters of a script, `ctx`, `*args` and `**kwargs` left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSignature {
    /// Parameters without a default.
    pub required: Vec<String>,
    /// Every named parameter.
    pub accepted: Vec<String>,
    /// `run()` takes `**kwargs`.
    pub var_kw: bool,
}

/// What importing a script told the validator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptReport {
    /// Why the typed schema could not be read (a "could not introspect schema" warning).
    pub schema_error: Option<String>,
    /// `run()`'s signature; `None` when the script did not import or has no `run`.
    pub signature: Option<RunSignature>,
    /// Field names of `run()`'s return TypedDict, when it declares one.
    pub returned: Option<Vec<String>>,
}

/// Something that can import a script and read its `run()` (the validator's Python side).
pub trait ScriptIntrospector: Send + Sync {
    /// Imports the script at `path` and reports its schema and signature.
    fn introspect(&self, path: &Path) -> ScriptReport;
}

/// Optional registries; without them the related checks are skipped, as in the reference.
#[derive(Clone, Copy, Default)]
pub struct ValidateOptions<'a> {
    /// Enables the "tool is not registered" warnings.
    pub tool_registry: Option<&'a ToolRegistry>,
    /// Enables S4 and SK1–SK4.
    pub skill_registry: Option<&'a SkillRegistry>,
    /// Enables the "could not introspect schema" warnings and SK3/SK4.
    pub script_introspector: Option<&'a dyn ScriptIntrospector>,
    /// Generation-time reconciliation: a subgraph naming a bundle must cover exactly the
    /// bundle's exit conditions with `success_values ∪ {on_error}` (needs `skill_registry`).
    pub reconcile_exits: bool,
}

/// Imports each script once per validation.
pub(crate) struct Scripts<'a> {
    pub(super) introspector: Option<&'a dyn ScriptIntrospector>,
    pub(super) reports: std::cell::RefCell<HashMap<std::path::PathBuf, ScriptReport>>,
}

impl Scripts<'_> {
    /// The report of `path`, `None` without an introspector.
    pub(crate) fn report(&self, path: &Path) -> Option<ScriptReport> {
        let introspector = self.introspector?;
        if let Some(report) = self.reports.borrow().get(path) {
            return Some(report.clone());
        }
        let report = introspector.introspect(path);
        self.reports
            .borrow_mut()
            .insert(path.to_path_buf(), report.clone());
        Some(report)
    }
}
