//! The Docker Engine API filter: read-only access to the host's engine, plus `exec`.
//!
//! The engine's socket is root on the host: `POST /containers/create` with a bind mount of `/`,
//! `GET /containers/{id}/archive` or `/export` (any container's files), `GET /images/{name}/get`
//! (any image's layers), builds, pulls with the user's registry credentials. A sandbox only ever
//! gets this filter's socket, and this module decides what crosses it:
//!
//! - [`decide`] (pure: no sockets, no clock): the request target is normalised once
//!   (`path.rs`: origin-form only, percent-decoded exactly once, encoded `/` `?` `#` `%`, dot
//!   segments, empty segments, a trailing slash, control and non-ASCII bytes refused, an optional
//!   `/vN.NN` prefix kept) and matched against exact (method, pattern) pairs in which the last
//!   segment names the endpoint, so `/images/x/get` can never pass for `/images/{name}/json`;
//!   `POST /containers/{id}/exec` bodies are decoded strictly (`exec.rs`) and refused when
//!   privileged or, unless [`DockerPolicy::allow_root_exec`], run as root. The engine is sent the
//!   normalised target, not the client's bytes.
//! - [`DockerFilter`] ([`serve`]): one HTTP/1.1 request per connection, its head rebuilt from an
//!   allowlist of headers (`http.rs`), `Transfer-Encoding` refused (Docker's clients send
//!   `Content-Length` bodies), pipelined bytes refused, the engine's answer relayed with
//!   `Connection: close`; an allowed `exec` start or `attach` that asks for `Upgrade: tcp` becomes a
//!   two-way byte copy once the engine answered 101 (`relay.rs`).
//!
//! A refusal is a Docker-style JSON error; a 403 quotes the method and the normalised path back
//! to the client that sent them (`airlock: GET /containers/x/archive is not allowed (read-only
//! Docker access)`). The decision log gets one line per request: the method, allow or deny and a
//! fixed reason, never a path, a name or a header value.
//!
//! What it does not protect against: a sandbox that may exec into a container may run anything
//! there as the container's default user (often root inside the container, never `--privileged`);
//! a user name that only the container's `/etc/passwd` maps to uid 0 cannot be seen here; `attach`
//! types into a container's main process; logs and `inspect` show whatever the containers hold.

mod exec;
mod http;
mod path;
mod relay;
pub mod serve;

#[cfg(test)]
mod tests;

pub use path::{Endpoint, MAX_TARGET_BYTES, Normalised, Routed, normalise, route};
pub use serve::DockerFilter;

/// The largest request body forwarded (an exec config is a few hundred bytes).
pub const MAX_BODY_BYTES: usize = 64 << 10;

/// What the user configured under `[tools.docker]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DockerPolicy {
    /// Let `exec` run as `root`/uid 0 (`User` naming it); `Privileged` stays refused.
    pub allow_root_exec: bool,
}

/// An allowed request, as the engine is to see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// The normalised target sent upstream: the version prefix as given, the path decoded once
    /// (it then holds no `%`, so the engine's own decoding leaves it as it is), the query unchanged.
    pub path_and_query: String,
    /// The endpoint may switch to a raw stream (`exec/{id}/start`, `containers/{id}/attach`).
    pub upgrade_allowed: bool,
}

/// A refused request: the HTTP status to answer with and a fixed reason (logged; never a value
/// from the request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denial {
    pub status: u16,
    pub reason: &'static str,
}

impl Denial {
    pub(crate) const fn new(status: u16, reason: &'static str) -> Denial {
        Denial { status, reason }
    }
}

/// The reason of a request outside the allowlist.
pub const NOT_ALLOWED: &str = "not in the read-only allowlist";

/// Judges one request: its method, its target as sent (`/v1.47/containers/json?all=1`), its
/// body (read whole, `Content-Length` bytes).
pub fn decide(
    method: &str,
    target: &str,
    body: &[u8],
    policy: &DockerPolicy,
) -> Result<Forward, Denial> {
    let routed = route(method, target)?;
    if body.len() > MAX_BODY_BYTES {
        return Err(Denial::new(413, "the body is too large"));
    }
    if !body.is_empty() && matches!(method, "GET" | "HEAD") {
        return Err(Denial::new(400, "a body on GET or HEAD is refused"));
    }
    if routed.endpoint == Endpoint::ExecCreate {
        exec::check(body, policy)?;
    }
    Ok(Forward {
        path_and_query: routed.normalised.path_and_query(),
        upgrade_allowed: routed.endpoint == Endpoint::Upgrade,
    })
}
