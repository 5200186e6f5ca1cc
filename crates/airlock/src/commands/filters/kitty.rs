//! The kitty filter of a launch.

use std::path::Path;
use std::sync::Arc;

use airlock_sandbox::SandboxSpec;
use airlock_sockets::{DecisionLog, Filter, kitty};

use super::{Filters, session_sockets};

/// Plans the kitty filter into `filters` (`[tools.kitty]`); a warning to print, if any.
pub fn plan_kitty(
    filters: &mut Filters,
    spec: &mut SandboxSpec,
    request: kitty::activate::Request<'_>,
    home: &Path,
) -> anyhow::Result<Option<String>> {
    let env = |k: &str| std::env::var_os(k);
    let (policy, host) =
        match kitty::activate::activation(request, &env).map_err(anyhow::Error::msg)? {
            kitty::activate::Activation::Off => return Ok(None),
            kitty::activate::Activation::Warn(warning) => return Ok(Some(warning)),
            kitty::activate::Activation::On { policy, host } => (policy, host),
        };
    let sockets = session_sockets(filters, spec, home)?;
    let listener = sockets.bind("kitty")?;
    let inside = sockets.inside_path("kitty");
    spec.env.insert(
        "KITTY_LISTEN_ON".into(),
        format!("unix:{}", inside.display()),
    );
    for key in kitty::activate::PASSED_ENV {
        if let Ok(value) = std::env::var(key) {
            spec.env.insert((*key).into(), value);
        }
    }
    let log = Arc::new(DecisionLog::open(&spec.state_root, "kitty"));
    let filter: Arc<dyn Filter> = Arc::new(kitty::KittyFilter::new(policy, host));
    filters.pending.push((listener, filter, log));
    Ok(None)
}
