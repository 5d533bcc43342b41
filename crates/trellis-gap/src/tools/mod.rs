//! Tool registry: built-in stubs, Python tool bundles and manifest-declared command tools.

mod builtin;
mod command;
mod descriptor;
mod error;
mod registry;

pub use crate::context::Tool;
pub use command::load_command_manifest;
pub use descriptor::ToolDescriptor;
pub(crate) use descriptor::check_arguments;
pub use error::ToolError;
pub(crate) use error::reply_to_result;
pub use registry::ToolRegistry;
