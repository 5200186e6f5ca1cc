//! One module per subcommand: parse results in, rendered output and an exit code out.

pub mod config;
pub mod doctor;
pub mod run;
pub mod sandboxes;
pub mod trust;
