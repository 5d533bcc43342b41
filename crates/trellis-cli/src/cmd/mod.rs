//! One module per `trellis` subcommand.

pub mod schema;
pub mod template;
