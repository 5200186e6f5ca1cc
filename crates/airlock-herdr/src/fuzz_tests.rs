//! Mutation fuzzing of every parser that reads bytes from outside: sbx output, config.json,
//! mapping files, the invocation context, the event JSON and port links. Deterministic (a fixed
//! xorshift seed) so a failure reproduces; each parser must return, never panic, and what it
//! accepts must keep its invariants.

use crate::backend::sbx_parse;

/// xorshift64: a fixed seed, so a failure reproduces (the filter's mutation tests share it).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING: &[&str] = &[
    "{", "}", "[", "]", "\"", ",", ":", "null", "0", "-1", "1e999", "\\u0000", "é", "\n", "name",
    "\"\"",
];

/// `count` mutants of `seed`: byte flips, truncations, splices of interesting tokens.
fn mutants(seed: &str, count: usize, rng: &mut Rng) -> Vec<String> {
    (0..count)
        .map(|_| {
            let mut bytes = seed.as_bytes().to_vec();
            for _ in 0..=rng.below(4) {
                match rng.below(4) {
                    0 if !bytes.is_empty() => {
                        let i = rng.below(bytes.len());
                        bytes[i] ^= 1 << rng.below(8);
                    }
                    1 if !bytes.is_empty() => bytes.truncate(rng.below(bytes.len())),
                    2 => {
                        let i = rng.below(bytes.len() + 1);
                        let token = INTERESTING[rng.below(INTERESTING.len())];
                        bytes.splice(i..i, token.bytes());
                    }
                    _ if !bytes.is_empty() => {
                        let i = rng.below(bytes.len());
                        bytes.remove(i);
                    }
                    _ => {}
                }
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .collect()
}

#[test]
fn sbx_listings_never_panic_and_never_drop_a_name() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let seeds = [
        r#"{"sandboxes":[{"name":"a","status":"running","ports":[{"host_port":1,"sandbox_port":2}]},{"name":"b"}]}"#,
        r#"[{"name":"a","state":"stopped"}]"#,
        r#"{"a":{"status":"running"},"b":{"agent":"claude"}}"#,
        "chatter\n{\"items\":null}",
    ];
    for seed in seeds {
        for input in mutants(seed, 3000, &mut rng) {
            if let Ok(list) = sbx_parse::sandbox_list(&input) {
                assert!(list.iter().all(|s| !s.name.is_empty()), "{input:?}");
            }
            if let Ok(ports) = sbx_parse::port_list(&input) {
                assert!(ports.iter().all(|p| p.sandbox_port > 0), "{input:?}");
            }
        }
    }
}

#[test]
fn config_mapping_context_event_and_links_never_panic() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let config = r#"{"agentKind":"aider","customAgents":{"aider":{"sbxAgent":"shell","command":["aider"]}},"paneRatio":0.4,"env":["A=1"]}"#;
    for input in mutants(config, 3000, &mut rng) {
        if let Ok(c) = crate::config::parse(&input) {
            assert!(
                c.pane_ratio > 0.0 && c.pane_ratio < 1.0 && c.agent(&c.agent_kind).is_ok(),
                "{input:?}"
            );
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let store = crate::store::Store::new(dir.path());
    std::fs::create_dir_all(store.panes_dir()).expect("mkdir");
    let mapping = r#"{"version":1,"paneId":"w1:p2","sandboxName":"n","agentKind":"claude-code","sbxAgent":"claude","localPath":"/r","workdir":"/r","workspaceMode":"mount","lifecycleState":"ready"}"#;
    for input in mutants(mapping, 2000, &mut rng) {
        std::fs::write(store.mapping_path("w1:p2"), &input).expect("write");
        if let Ok(Some(m)) = store.load("w1:p2") {
            assert_eq!(m.version, 1, "{input:?}");
        }
    }
    let ctx =
        r#"{"workspace_id":"w1","focused_pane_id":"w1:p1","worktree":{"checkout_path":"/r"}}"#;
    for input in mutants(ctx, 2000, &mut rng) {
        let _ = crate::context::parse_context(Some(&input));
    }
    let event = r#"{"event":"worktree.removed","data":{"worktree":{"path":"/repo"}}}"#;
    for input in mutants(event, 2000, &mut rng) {
        if let Ok(path) = crate::event::removed_path(Some(&input)) {
            assert!(path.starts_with('/'), "{input:?}");
        }
    }
    for input in mutants("airlock://herdr-claude-code-0123/3000", 2000, &mut rng) {
        if let Ok((name, port)) = crate::actions::parse_link(&input) {
            assert!(
                port > 0
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'),
                "{input:?}"
            );
        }
    }
}
