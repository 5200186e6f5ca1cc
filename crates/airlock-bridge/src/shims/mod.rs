//! The shims: names `airlock-shim` (and the airlock binary, multi-call) answers to inside a sandbox. Each keeps only
//! its own argument handling, messages and exit policy; the transport is [`crate::client`].

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use crate::client::{self, Answer, ClientError};
use crate::paths::SANDBOX_SHIM_DIR;

mod command;
mod credential;
mod edit;
mod open;
mod sound;

pub use edit::{PathMap, translate};

/// What a shim name does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShimKind {
    Open,
    Edit,
    Credential,
    Sound,
}

/// Every fixed shim name (configured host commands come on top).
pub const SHIM_NAMES: &[(&str, ShimKind)] = &[
    ("xdg-open", ShimKind::Open),
    ("sensible-browser", ShimKind::Open),
    ("x-www-browser", ShimKind::Open),
    ("www-browser", ShimKind::Open),
    ("gnome-open", ShimKind::Open),
    ("open", ShimKind::Open),
    ("code", ShimKind::Edit),
    ("codium", ShimKind::Edit),
    ("git-credential-airlock", ShimKind::Credential),
    ("git-credential-osxkeychain", ShimKind::Credential),
    ("git-credential-manager", ShimKind::Credential),
    ("git-credential-manager-core", ShimKind::Credential),
    ("git-credential-libsecret", ShimKind::Credential),
    ("paplay", ShimKind::Sound),
];

/// A shim to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shim {
    Fixed {
        name: String,
        kind: ShimKind,
    },
    /// A configured host command (its name is in the sandbox's shim dir).
    HostCommand(String),
}

/// The shim `argv0` names, if any. A fixed name is always a shim; another name is a host command
/// only when the sandbox's shim dir holds it, so a renamed airlock on the host stays the CLI.
pub fn shim_for(argv0: &std::ffi::OsStr) -> Option<Shim> {
    let name = Path::new(argv0).file_name()?.to_str()?;
    if let Some((name, kind)) = SHIM_NAMES.iter().find(|(n, _)| *n == name) {
        return Some(Shim::Fixed {
            name: (*name).to_owned(),
            kind: *kind,
        });
    }
    if name.starts_with("airlock") {
        return None;
    }
    let in_shim_dir = Path::new(SANDBOX_SHIM_DIR)
        .join(name)
        .symlink_metadata()
        .is_ok();
    in_shim_dir.then(|| Shim::HostCommand(name.to_owned()))
}

/// Runs a shim with its arguments (without argv[0]) and returns the process exit code.
pub fn run(shim: &Shim, args: Vec<OsString>) -> i32 {
    match shim {
        Shim::Fixed { name, kind } => match kind {
            ShimKind::Open => open::run(name, &args),
            ShimKind::Edit => edit::run(name, &args),
            ShimKind::Credential => credential::run(&args),
            ShimKind::Sound => sound::run(&args),
        },
        Shim::HostCommand(name) => command::run(name, &args),
    }
}

/// POSTs a JSON body to the bridge found by [`client::sandbox_paths`].
fn post(route: &str, body: &serde_json::Value, timeout: Duration) -> Result<Answer, ClientError> {
    client::post(
        &client::sandbox_paths(),
        route,
        body.to_string().into_bytes(),
        timeout,
    )
}
