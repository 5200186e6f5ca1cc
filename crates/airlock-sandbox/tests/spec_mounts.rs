//! Spec tests of `[[sandbox.mounts]]`: pattern matches expanded into mounts, the overlay modes,
//! which entry wins a target, and the refusals. The host walk itself is tested in
//! `src/mount_patterns.rs`; here its result is a fixture.

mod fixture;

use std::path::{Path, PathBuf};

use airlock_config::{MountMode, Profile, ProfileMount};
use airlock_sandbox::host::PathKind;
use airlock_sandbox::mount_patterns::PatternMatches;
use airlock_sandbox::{HostFacts, MountOp, PrepareStep, RunRequest, SandboxSpec, SpecError, Upper};
use fixture::{dir, host, mount, numbered, pattern};

const PROJECT_FILE: &str = "/home/dev/code/app/.airlock.toml";

fn spec_of(h: &HostFacts, mounts: Vec<ProfileMount>) -> Result<SandboxSpec, SpecError> {
    let profile = Profile {
        mounts: numbered(mounts),
        ..Profile::default()
    };
    airlock_sandbox::build(&profile, h, &RunRequest::default())
}

/// The custom mounts, in mount order, each with the rule the spec names for it.
fn custom(spec: &SandboxSpec) -> Vec<(MountOp, String)> {
    spec.mounts
        .iter()
        .filter_map(|op| {
            let origin = spec.mount_origins.get(op.target())?;
            origin
                .contains("[[sandbox.mounts]]")
                .then(|| (op.clone(), origin.clone()))
        })
        .collect()
}

fn in_project(mut m: ProfileMount) -> ProfileMount {
    m.origin = PROJECT_FILE.into();
    m
}

#[test]
fn each_match_becomes_a_mount_with_the_rule_that_made_it() {
    let mut h = host();
    let mounts = vec![
        pattern(
            &mut h,
            "**/*.key",
            MountMode::Hidden,
            &[
                "~/code/app/a.key",
                "~/code/app/deep/b.key",
                "~/code/app/old.key/",
            ],
        ),
        pattern(
            &mut h,
            "~/.config/*/token",
            MountMode::Readonly,
            &["~/.config/gh/token"],
        ),
        pattern(
            &mut h,
            "build/*/",
            MountMode::Tmpoverlay,
            &["~/code/app/build/out/"],
        ),
        mount(&mut h, "~/shared", MountMode::Overlay, dir()),
        pattern(
            &mut h,
            "**/node_modules/",
            MountMode::Tmpfs,
            &["~/code/app/node_modules/"],
        ),
    ];
    let spec = spec_of(&h, mounts).expect("spec");
    insta::assert_json_snapshot!("pattern_mounts", custom(&spec));
    let overlay = spec.state_root.join("overlay/mount-shared-");
    let persistent: Vec<&PathBuf> = spec
        .prepare
        .iter()
        .filter_map(|step| match step {
            PrepareStep::OverlayDirs { dir } => Some(dir),
            _ => None,
        })
        .collect();
    assert_eq!(persistent.len(), 1);
    assert!(
        persistent[0]
            .to_string_lossy()
            .starts_with(overlay.to_str().unwrap()),
        "{persistent:?}"
    );
    assert!(spec.has_persistent_uppers());
    for writable in ["/home/dev/shared", "/home/dev/code/app/build/out"] {
        assert!(
            spec.writable.contains(&PathBuf::from(writable)),
            "{writable}"
        );
    }
    assert!(
        !spec
            .writable
            .contains(&PathBuf::from("/home/dev/.config/gh/token"))
    );
    assert!(spec.warnings.is_empty(), "{:?}", spec.warnings);
    assert_eq!(
        spec.mount_origins
            .get(Path::new("/usr"))
            .map(String::as_str),
        Some("a system directory"),
        "airlock's own mounts say what they are too"
    );
}

#[test]
fn an_exact_path_wins_over_a_pattern_in_either_order() {
    for path_first in [true, false] {
        let mut h = host();
        let exact = mount(
            &mut h,
            "~/code/app/dev.key",
            MountMode::Readonly,
            PathKind::File,
        );
        let glob = pattern(
            &mut h,
            "**/*.key",
            MountMode::Hidden,
            &["~/code/app/dev.key", "~/code/app/prod.key"],
        );
        let mounts = if path_first {
            vec![exact, in_project(glob)]
        } else {
            vec![glob, in_project(exact)]
        };
        let got: Vec<MountOp> = custom(&spec_of(&h, mounts).expect("spec"))
            .into_iter()
            .map(|(op, _)| op)
            .collect();
        assert_eq!(
            got,
            [
                MountOp::Bind {
                    source: "/home/dev/code/app/dev.key".into(),
                    target: "/home/dev/code/app/dev.key".into(),
                    writable: false,
                },
                MountOp::MaskFile {
                    target: "/home/dev/code/app/prod.key".into()
                },
            ],
            "path first: {path_first}"
        );
    }
}

#[test]
fn of_two_patterns_the_later_entry_wins() {
    let mut h = host();
    let first = pattern(
        &mut h,
        "**/*.key",
        MountMode::Hidden,
        &["~/code/app/a.key", "~/code/app/pub/b.key"],
    );
    let second = in_project(pattern(
        &mut h,
        "pub/*",
        MountMode::Readonly,
        &["~/code/app/pub/b.key"],
    ));
    let spec = spec_of(&h, vec![first, second]).expect("spec");
    let got = custom(&spec);
    assert_eq!(
        got,
        [
            (
                MountOp::MaskFile {
                    target: "/home/dev/code/app/a.key".into()
                },
                "/home/dev/.config/airlock/config.toml: [[sandbox.mounts]] #1 \
                 (pattern = \"**/*.key\", mode = \"hidden\")"
                    .into()
            ),
            (
                MountOp::Bind {
                    source: "/home/dev/code/app/pub/b.key".into(),
                    target: "/home/dev/code/app/pub/b.key".into(),
                    writable: false,
                },
                "/home/dev/code/app/.airlock.toml: [[sandbox.mounts]] #1 \
                 (pattern = \"pub/*\", mode = \"readonly\")"
                    .into()
            ),
        ]
    );
}

#[test]
fn a_child_is_mounted_after_its_parent_so_its_mode_applies_inside() {
    let mut h = host();
    let mounts = vec![
        // Listed child first: the order in the spec is by depth, not by entry.
        pattern(
            &mut h,
            "~/data/**/*.key",
            MountMode::Hidden,
            &["~/data/k/x.key"],
        ),
        mount(&mut h, "~/data", MountMode::Readonly, dir()),
        mount(&mut h, "~/data/scratch", MountMode::Tmpfs, dir()),
    ];
    let spec = spec_of(&h, mounts).expect("spec");
    let targets: Vec<String> = custom(&spec)
        .iter()
        .map(|(op, _)| op.target().display().to_string())
        .collect();
    assert_eq!(
        targets,
        [
            "/home/dev/data",
            "/home/dev/data/scratch",
            "/home/dev/data/k/x.key"
        ]
    );
}

#[test]
fn matches_inside_a_hidden_directory_are_dropped_but_a_path_there_is_refused() {
    let mut h = host();
    let mounts = vec![
        pattern(
            &mut h,
            "**/secrets/",
            MountMode::Hidden,
            &["~/code/app/secrets/"],
        ),
        pattern(
            &mut h,
            "**/*.key",
            MountMode::Readonly,
            &["~/code/app/secrets/a.key", "~/code/app/b.key"],
        ),
    ];
    let got: Vec<String> = custom(&spec_of(&h, mounts.clone()).expect("spec"))
        .iter()
        .map(|(op, _)| op.target().display().to_string())
        .collect();
    assert_eq!(
        got,
        ["/home/dev/code/app/b.key", "/home/dev/code/app/secrets"]
    );

    let inside = mount(
        &mut h,
        "~/code/app/secrets/c.key",
        MountMode::Readonly,
        PathKind::File,
    );
    let err = spec_of(&h, vec![mounts[0].clone(), inside]).expect_err("a path inside");
    assert_eq!(
        err.to_string(),
        "/home/dev/.config/airlock/config.toml: [[sandbox.mounts]] #1 (pattern = \"**/secrets/\", \
         mode = \"hidden\"): mode hidden at /home/dev/code/app/secrets would hide \
         /home/dev/code/app/secrets/c.key; choose a narrower path"
    );
}

#[test]
fn more_than_ten_thousand_matches_are_refused_with_the_count() {
    let mut h = host();
    let m = pattern(&mut h, "**/*", MountMode::Hidden, &[]);
    h.mount_patterns.insert(
        "**/*".into(),
        PatternMatches {
            base: "/home/dev/code/app".into(),
            count: 10_001,
            ..PatternMatches::default()
        },
    );
    let err = spec_of(&h, vec![m]).expect_err("too many");
    assert_eq!(
        err.to_string(),
        "/home/dev/.config/airlock/config.toml: [[sandbox.mounts]] #1 (pattern = \"**/*\", \
         mode = \"hidden\") matches 10001 paths under /home/dev/code/app, more than the 10000 one \
         pattern may mount; nothing was mounted or created. Narrow the pattern (name the \
         directory the matches are in), or hide their directory as a whole"
    );
}

#[test]
fn a_walk_that_did_not_finish_is_refused() {
    let mut h = host();
    let m = pattern(&mut h, "~/**/*.key", MountMode::Hidden, &[]);
    h.mount_patterns.insert(
        "~/**/*.key".into(),
        PatternMatches {
            base: "/home/dev".into(),
            timed_out: true,
            seen: 912_345,
            ..PatternMatches::default()
        },
    );
    let err = spec_of(&h, vec![m]).expect_err("timed out");
    assert!(
        err.to_string().ends_with(
            ": the walk of /home/dev did not finish within 5 s (912345 entries seen), so what it \
             matches is unknown; narrow the pattern (name the directory the matches are in)"
        ),
        "{err}"
    );
}

#[test]
fn a_pattern_that_matched_nothing_is_a_warning() {
    let mut h = host();
    let m = pattern(&mut h, "**/*.pfx", MountMode::Hidden, &[]);
    let spec = spec_of(&h, vec![m]).expect("not an error");
    assert_eq!(
        spec.warnings,
        [
            "/home/dev/.config/airlock/config.toml: [[sandbox.mounts]] #1 (pattern = \"**/*.pfx\", \
          mode = \"hidden\") matched nothing under /home/dev/code/app; nothing is mounted for it"
        ]
    );
    assert!(custom(&spec).is_empty());
}

#[test]
fn skipped_symlinks_are_a_warning() {
    let mut h = host();
    let m = pattern(&mut h, "*.key", MountMode::Hidden, &["~/code/app/a.key"]);
    let found = h.mount_patterns.get_mut("*.key").expect("fixture");
    found.skipped = 7;
    found.skipped_paths = vec!["/home/dev/code/app/link.key".into()];
    let spec = spec_of(&h, vec![m]).expect("spec");
    assert_eq!(
        spec.warnings,
        [
            "/home/dev/.config/airlock/config.toml: [[sandbox.mounts]] #1 (pattern = \"*.key\", \
          mode = \"hidden\"): not mounted, as a pattern never mounts symlinks, sockets, fifos or \
          devices: /home/dev/code/app/link.key and 6 more"
        ]
    );
}

#[test]
fn directory_modes_on_a_file_are_refused_naming_the_entry() {
    for mode in [MountMode::Overlay, MountMode::Tmpoverlay, MountMode::Tmpfs] {
        let mut h = host();
        let m = pattern(
            &mut h,
            "cache*",
            mode,
            &["~/code/app/cache/", "~/code/app/cache.txt"],
        );
        let err = spec_of(&h, vec![m]).expect_err("a file");
        assert_eq!(
            err.to_string(),
            format!(
                "/home/dev/.config/airlock/config.toml: [[sandbox.mounts]] #1 (pattern = \
                 \"cache*\", mode = \"{0}\"): mode {0} needs a directory, but \
                 /home/dev/code/app/cache.txt is a file; use mode = \"hidden\" or \"readonly\" for \
                 a file (a pattern ending in / matches directories only)",
                mode.as_str()
            )
        );
        let mut h = host();
        let m = mount(&mut h, "~/notes.txt", mode, PathKind::File);
        let err = spec_of(&h, vec![m]).expect_err("a file");
        assert!(err.to_string().contains("needs a directory"), "{err}");
    }
}

#[test]
fn a_match_on_one_of_airlocks_own_mounts_is_refused() {
    let mut h = host();
    let m = pattern(&mut h, "~/code/*/", MountMode::Readonly, &["~/code/app/"]);
    let err = spec_of(&h, vec![m]).expect_err("the project");
    assert_eq!(
        err.to_string(),
        "/home/dev/.config/airlock/config.toml: [[sandbox.mounts]] #1 (pattern = \"~/code/*/\", \
         mode = \"readonly\"): /home/dev/code/app is one of airlock's own mounts (the project); \
         mount a path inside it"
    );
}

#[test]
fn a_custom_overlay_keeps_one_upper_per_target_and_a_tmpoverlay_none() {
    let mut h = host();
    let a = mount(&mut h, "~/shared", MountMode::Overlay, dir());
    let spec_a = spec_of(&h, vec![a]).expect("spec");
    let mut h = host();
    let b = pattern(&mut h, "~/shar*/", MountMode::Overlay, &["~/shared/"]);
    let spec_b = spec_of(&h, vec![b]).expect("spec");
    let upper = |spec: &SandboxSpec| {
        spec.mounts.iter().find_map(|op| match op {
            MountOp::Overlay { upper, .. } => Some(upper.clone()),
            _ => None,
        })
    };
    assert_eq!(
        upper(&spec_a),
        upper(&spec_b),
        "a path and a pattern naming one dir share its saved writes"
    );
    assert!(matches!(upper(&spec_a), Some(Upper::Persistent { .. })));

    let mut h = host();
    let t = mount(&mut h, "~/shared", MountMode::Tmpoverlay, dir());
    let spec = spec_of(&h, vec![t]).expect("spec");
    assert_eq!(upper(&spec), Some(Upper::Throwaway));
    assert!(spec.prepare.is_empty());
    assert!(!spec.has_persistent_uppers());
}

#[test]
fn a_directory_holding_airlocks_own_is_a_warning() {
    let mut h = host();
    let m = pattern(&mut h, "~/.*/", MountMode::Readonly, &["~/.cargo/"]);
    let found = h.mount_patterns.get_mut("~/.*/").expect("fixture");
    found.holding_airlock = vec!["/home/dev/.local".into(), "/home/dev/.config".into()];
    let spec = spec_of(&h, vec![m]).expect("spec");
    assert_eq!(
        spec.warnings,
        [
            "/home/dev/.config/airlock/config.toml: [[sandbox.mounts]] #1 (pattern = \"~/.*/\", \
          mode = \"readonly\"): not mounted, as they hold airlock's own config, sandboxes or \
          state: /home/dev/.local, /home/dev/.config; name what you need inside them"
        ]
    );
    assert_eq!(custom(&spec).len(), 1, "~/.cargo is mounted");
}
