//! airlock's network egress gate.
//!
//! Owns the egress policy (host rules, the `balanced` / `allow-all` / `deny-all` presets, the check of
//! resolved addresses), the HTTP/1.1 forward proxy with `CONNECT` that enforces it, the JSON-lines
//! decision log and reading it back ([`log`]: filters, stats, time order), and the allowlist
//! suggested from it ([`suggest`]). It does not create network namespaces or listening sockets:
//! the sandbox backend hands [`spawn`] a listener and the resolved
//! [`airlock_config::EgressSettings`].
//!
//! ```no_run
//! # fn demo(settings: &airlock_config::EgressSettings) -> Result<(), Box<dyn std::error::Error>> {
//! let policy = airlock_egress::EgressPolicy::from_settings(settings, &[], &[])?;
//! let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
//! let proxy = airlock_egress::spawn(listener, policy, "/tmp/network.jsonl".into())?;
//! // ... run the sandbox with HTTP(S)_PROXY pointing at the listener ...
//! proxy.shutdown();
//! # Ok(()) }
//! ```

mod addr;
pub mod ask;
mod host;
pub mod inject;
pub mod log;
pub mod nss;
mod policy;
pub mod presets;
mod proxy;
pub mod suggest;

pub use addr::{AddressClass, classify, local_addresses};
pub use host::{Host, HostError, parse_authority};
pub use log::{LogDecision, LogRecord, now_rfc3339, rfc3339_from_unix_millis};
pub use policy::{Decision, EgressPolicy, PolicyError, Rule};
/// Entry points for the fuzz targets in `fuzz/` (not an API).
#[doc(hidden)]
pub use proxy::fuzzing;
pub use proxy::{
    ACCEPTED_METHODS, ProxyConfig, ProxyHandle, RESERVED_FDS, UpstreamProxy, spawn, spawn_with,
};
