//! Tests of the Docker filter: the allowlist and normalisation ([`path`]), exec bodies
//! ([`exec`]), heads ([`http`]) and the filter on a socket with a fake engine ([`serve`],
//! [`stream`]).

mod engine;
mod exec;
mod http;
mod path;
mod serve;
mod stream;

use super::{Denial, DockerPolicy, Forward, decide};

const READ_ONLY: DockerPolicy = DockerPolicy {
    allow_root_exec: false,
};

/// The forward of an allowed request without a body.
fn allowed(method: &str, target: &str) -> Forward {
    decide(method, target, b"", &READ_ONLY)
        .unwrap_or_else(|d| panic!("{method} {target} refused: {d:?}"))
}

/// The denial of a request without a body.
fn denied(method: &str, target: &str) -> Denial {
    match decide(method, target, b"", &READ_ONLY) {
        Ok(f) => panic!("{method} {target} allowed: {f:?}"),
        Err(d) => d,
    }
}
