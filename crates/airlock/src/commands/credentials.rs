//! `[network.credentials]` at launch: the proxy's injector (its rules and a new session CA) made,
//! and the CA written where the spec binds it inside.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use airlock_egress::inject::Injector;
use airlock_sandbox::SandboxSpec;
use anyhow::Context as _;

/// The injector for `spec`, with its CA written for the sandbox; `None` without rules.
pub fn start(
    spec: &SandboxSpec,
    env: &BTreeMap<String, String>,
    home: &Path,
) -> anyhow::Result<Option<Arc<Injector>>> {
    let Some(egress) = &spec.egress else {
        return Ok(None);
    };
    let Some(trust) = &egress.credential_trust else {
        return Ok(None);
    };
    let injector = Injector::new(&spec.name, &egress.credentials, env, home)
        .map_err(|e| anyhow::anyhow!("[network.credentials]: {e}"))?;
    airlock_sandbox::builder::credentials::write_trust(trust, injector.ca_pem())
        .with_context(|| format!("cannot write the session CA to {}", trust.ca.display()))?;
    Ok(Some(Arc::new(injector)))
}
