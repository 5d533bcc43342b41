//! One module per `trellis` subcommand.

pub mod authorization;
pub mod control;
pub mod doctor;
pub mod follow;
pub mod logs;
pub mod observe;
pub mod profile;
pub mod profile_remote;
pub mod prune;
pub mod remote;
pub mod run;
pub mod run_args;
pub mod run_gap;
pub mod schema;
pub mod serve;
pub mod skill;
pub mod target;
pub mod template;
pub mod trace;
pub mod ui;
pub mod update;
pub mod validate;
pub mod worker;
