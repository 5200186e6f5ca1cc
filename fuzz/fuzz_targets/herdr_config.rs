//! The herdr plugin's config decoder (`airlock-herdr/src/config.rs`): `config.json` from the
//! plugin's config directory.
//!
//! Beyond "no panic": an accepted config passes its own validation (pane ratio strictly between 0
//! and 1, a known agent kind whose adapter builds, `agentEnv` all `KEY=VALUE`, a sandbox-name-safe
//! prefix) and reads back the same after serialising it again.
#![no_main]

use airlock_herdr::config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(c) = config::parse(text) else {
        return;
    };
    assert!(c.pane_ratio > 0.0 && c.pane_ratio < 1.0, "{}", c.pane_ratio);
    assert!(c.validate().is_ok());
    let agent = c
        .agent(&c.agent_kind)
        .expect("the configured agent kind builds");
    assert!(!agent.command.is_empty());
    assert_eq!(c.agent_env_pairs().len(), c.agent_env.len());
    assert!(
        c.sandbox_name_prefix
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '.' || ch == '-')
    );
    let json = serde_json::to_string(&c).expect("serialises");
    let again = config::parse(&json).unwrap_or_else(|e| panic!("{}\n{json}", e.message));
    assert_eq!(again, c, "{json}");
});
