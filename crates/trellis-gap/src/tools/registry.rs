//! The tool registry: tools by name in registration order, Python tool functions and the
//! tools of skill bundles.

use super::descriptor::ToolDescriptor;
use super::error::ToolError;
use crate::context::{NodeContext, Tool, ToolLookup};
use crate::skills::SkillRegistry;
use indexmap::IndexMap;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// A Python function in a module file, called through the bridge.
#[derive(Debug, Clone)]
struct PythonTool {
    name: String,
    module_path: PathBuf,
    /// Empty: the function registered under the tool's name by `@tool` in the module.
    function: String,
    /// The skill bundle's synthetic package the module imports under, for bundle tools.
    package: Option<Value>,
}

impl Tool for PythonTool {
    fn call(&self, ctx: &NodeContext<'_>, args: Map<String, Value>) -> Result<Value, ToolError> {
        ctx.call_python_tool(
            &self.name,
            &self.module_path,
            &self.function,
            self.package.as_ref(),
            args,
        )
    }
}

#[derive(Clone)]
struct Registered {
    descriptor: ToolDescriptor,
    body: Arc<dyn Tool>,
}

/// Tools by name, in registration order.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: IndexMap<String, Registered>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool; a name already taken is a collision error.
    pub fn register(
        &mut self,
        descriptor: ToolDescriptor,
        body: Arc<dyn Tool>,
    ) -> Result<(), ToolError> {
        if self.tools.contains_key(&descriptor.name) {
            return Err(ToolError::Collision {
                name: descriptor.name,
            });
        }
        self.tools
            .insert(descriptor.name.clone(), Registered { descriptor, body });
        Ok(())
    }

    /// Registers (or replaces) a Rust closure as tool `name`.
    pub fn register_fn<F>(&mut self, name: &str, body: F)
    where
        F: Fn(&NodeContext<'_>, Map<String, Value>) -> Result<Value, ToolError>
            + Send
            + Sync
            + 'static,
    {
        self.tools.insert(
            name.to_string(),
            Registered {
                descriptor: ToolDescriptor::new(name),
                body: Arc::new(body),
            },
        );
    }

    /// Registers Python function `function` of the module file `module_path` as tool `name`.
    ///
    /// The module is imported once per bridge process, so module-level state persists across calls.
    pub fn register_python(
        &mut self,
        name: &str,
        module_path: impl Into<PathBuf>,
        function: &str,
    ) -> Result<(), ToolError> {
        let body = PythonTool {
            name: name.to_string(),
            module_path: module_path.into(),
            function: function.to_string(),
            package: None,
        };
        self.register(ToolDescriptor::new(name), Arc::new(body))
    }

    /// Registers the tool bundle of every skill bundle: each name of its SKILL.md `gap.tools`
    /// is the `@tool`-decorated function of that name in its `tools.py`, imported under the
    /// bundle's synthetic package. Names already registered (a connector's) keep their tool.
    pub fn register_bundle_tools(&mut self, skills: &SkillRegistry) -> Result<(), ToolError> {
        for bundle in skills.bundles() {
            let module_path = bundle.dir.join("tools.py");
            if bundle.tools.is_empty() {
                continue;
            }
            if !module_path.is_file() {
                return Err(ToolError::Manifest {
                    path: bundle.dir.join("SKILL.md"),
                    message: "declares gap.tools but the bundle has no tools.py".to_string(),
                });
            }
            for (name, summary) in &bundle.tools {
                if self.contains(name) {
                    continue;
                }
                let body = PythonTool {
                    name: name.clone(),
                    module_path: module_path.clone(),
                    function: String::new(),
                    package: Some(serde_json::json!({
                        "name": bundle.package(),
                        "dir": bundle.dir.to_string_lossy(),
                        "scripts_dir": bundle.dir.join("scripts").to_string_lossy(),
                        "prompts": bundle.prompts,
                    })),
                };
                let mut descriptor = ToolDescriptor::new(name.clone());
                descriptor.summary = summary.clone();
                self.register(descriptor, Arc::new(body))?;
            }
        }
        Ok(())
    }

    /// True when `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// Registered names in registration order.
    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// Number of registered tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The descriptor of `name`.
    pub fn descriptor(&self, name: &str) -> Option<&ToolDescriptor> {
        self.tools.get(name).map(|r| &r.descriptor)
    }
}

impl ToolLookup for ToolRegistry {
    /// Looks a tool up, with the reference's not-found error.
    fn lookup(&self, name: &str) -> Result<(&ToolDescriptor, Arc<dyn Tool>), ToolError> {
        match self.tools.get(name) {
            Some(r) => Ok((&r.descriptor, Arc::clone(&r.body))),
            None => Err(ToolError::NotFound {
                name: name.to_string(),
                available: self.names().join(", "),
            }),
        }
    }
}
