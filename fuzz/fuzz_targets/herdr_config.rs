//! The herdr plugin's config decoder (`airlock-herdr/src/config.rs`): `config.json` from the
//! plugin's config directory.
//!
//! Beyond "no panic": an accepted config passes its own validation (pane ratio strictly between 0
//! and 1, a known agent kind whose adapter builds, `agentEnv` all `KEY=VALUE`, a sandbox-name-safe
//! prefix) and reads back the same after serialising it again (numbers to within a few ulps).
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
    let mut again = config::parse(&json).unwrap_or_else(|e| panic!("{}\n{json}", e.message));
    // serde_json's default float parser may land one ulp off (its exact one is the
    // `float_roundtrip` feature), so the numbers are compared as close, the rest as equal.
    assert!(close(again.pane_ratio, c.pane_ratio), "{json}");
    let cpus = |n: &Option<serde_json::Number>| n.as_ref().map(|n| n.as_f64().expect("a number"));
    match (cpus(&again.cpus), cpus(&c.cpus)) {
        (Some(a), Some(b)) => assert!(close(a, b), "{json}"),
        (a, b) => assert_eq!(a, b, "{json}"),
    }
    again.pane_ratio = c.pane_ratio;
    again.cpus = c.cpus.clone();
    assert_eq!(again, c, "{json}");
});

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs())
}
