//! `[[include]]`: which files apply to which project, in what order, with which origin, and every
//! bad input.

mod common;

use std::fs;
use std::path::Path;

use airlock_config::{ConfigError, EnvSource, NetworkMode, TrustStore, parse_str};
use common::{Home, assert_contains};

#[test]
fn an_include_applies_only_when_the_project_path_matches() {
    let h = Home::new();
    h.global(
        "[sandbox]\nnetwork = \"none\"\n\
         [[include]]\nif = \"dir:~/work/**\"\npath = \"work.toml\"\n",
    );
    let work = h.file(
        ".config/airlock/work.toml",
        "[sandbox]\nnetwork = \"host\"\n[sandbox.environment.CORP]\nvalue = \"1\"\n",
    );
    let loaded = h.load().expect("loads");
    assert_eq!(loaded.includes.as_slice(), std::slice::from_ref(&work));
    assert_eq!(
        loaded.profile.network,
        NetworkMode::Host,
        "the include wins over global"
    );
    assert_eq!(loaded.profile.environment["CORP"].origin, work);

    let elsewhere = h.home().join("play/app");
    fs::create_dir_all(&elsewhere).expect("dir");
    let loaded = airlock_config::load(&h.paths, &elsewhere).expect("loads");
    assert!(loaded.includes.is_empty());
    assert_eq!(loaded.profile.network, NetworkMode::None);
    assert!(loaded.profile.environment.is_empty());
}

#[test]
fn includes_layer_in_order_between_the_global_and_the_project_file() {
    let h = Home::new();
    let global = h.global(
        r#"
        [sandbox.environment.G]
        value = "global"
        [sandbox.environment.A]
        value = "global"
        [network]
        allow = ["global.example"]

        [[include]]
        if = "dir:~/work/*"
        path = "~/cfg/first.toml"

        [[include]]
        if = "dir:/nowhere/**"
        path = "/nowhere/missing.toml"

        [[include]]
        if = "dir:~/work/app"
        path = "second.toml"
        "#,
    );
    let first = h.file(
        "cfg/first.toml",
        "[sandbox.environment.A]\nvalue = \"first\"\n[sandbox.environment.B]\nvalue = \"first\"\n\
         [network]\nallow = [\"first.example\"]\n[tools.git]\nmode = \"readonly\"\n",
    );
    let second = h.file(
        ".config/airlock/second.toml",
        "[sandbox.environment.B]\nvalue = \"second\"\n[sandbox.environment.C]\nvalue = \"second\"\n\
         [[sandbox.mounts]]\npath = \"~/data\"\nmode = \"readonly\"\n",
    );
    let project = h.trusted_project("[sandbox.environment.C]\nvalue = \"project\"\n");
    let loaded = h.load().expect("loads");
    assert_eq!(loaded.includes, [first.clone(), second.clone()]);
    let env = &loaded.profile.environment;
    let got: Vec<(&str, &str, &Path)> = env
        .iter()
        .map(|(name, var)| (name.as_str(), var.source.text(), var.origin.as_path()))
        .collect();
    assert_eq!(
        got,
        [
            ("A", "first", first.as_path()),
            ("B", "second", second.as_path()),
            ("C", "project", project.as_path()),
            ("G", "global", global.as_path()),
        ]
    );
    let allow: Vec<(&str, &Path)> = loaded
        .profile
        .egress
        .allow
        .iter()
        .map(|r| (r.rule.as_str(), r.origin.as_path()))
        .collect();
    assert_eq!(
        allow,
        [
            ("global.example", global.as_path()),
            ("first.example", first.as_path())
        ]
    );
    assert_eq!(loaded.profile.tools["git"]["mode"].origin, first);
    assert_eq!(loaded.profile.mounts[0].origin, second);
    // `config show` names the included files as the origin of their keys.
    let shown = airlock_config::render_profile(&loaded.profile);
    assert_contains(
        &shown,
        &[
            &format!("# from {first:?}\n[sandbox.environment.A]"),
            &format!("\"first.example\", # from {first:?}"),
            &format!("mode = \"readonly\" # from {first:?}"),
            &format!("# from {second:?}\n[[sandbox.mounts]]"),
        ],
    );
    assert!(matches!(
        env["A"].source,
        EnvSource::Value(ref v) if v == "first"
    ));
}

#[test]
fn a_missing_include_file_is_an_error_naming_both_files() {
    let h = Home::new();
    let global = h.global("[[include]]\nif = \"dir:~/work/**\"\npath = \"gone.toml\"\n");
    let msg = h.load_err();
    assert_contains(
        &msg,
        &[
            &global.display().to_string(),
            "[[include]] path = \"gone.toml\"",
            "if = \"dir:~/work/**\" matches this project",
            &format!(
                "{} does not exist",
                h.home().join(".config/airlock/gone.toml").display()
            ),
        ],
    );
}

#[test]
fn only_dir_conditions_exist() {
    for (cond, why) in [
        ("branch:main", "`branch:` is not a condition airlock knows"),
        ("~/work/**", "no `dir:` prefix"),
        ("dir:", "empty"),
        ("dir:work/**", "absolute path or start with `~/`"),
        ("dir:~/work/[", "the glob is not valid"),
    ] {
        let text = format!("[[include]]\nif = {cond:?}\npath = \"w.toml\"\n");
        let msg = parse_str(&text, Path::new("/g.toml"))
            .expect_err(cond)
            .to_string();
        assert_contains(
            &msg,
            &[
                "/g.toml",
                &format!("[[include]] if = {cond:?}"),
                why,
                "if = \"dir:<glob>\"",
            ],
        );
    }
}

#[test]
fn bad_include_entries_are_errors_naming_the_file() {
    let err = |text: &str| {
        parse_str(text, Path::new("/g.toml"))
            .expect_err(text)
            .to_string()
    };
    assert_contains(
        &err("[[include]]\nif = \"dir:/x\"\npath = \"\"\n"),
        &["/g.toml", "[[include]] path = \"\"", "empty"],
    );
    assert_contains(&err("[[include]]\nif = \"dir:/x\"\n"), &["/g.toml", "path"]);
    assert_contains(&err("[[include]]\npath = \"a.toml\"\n"), &["/g.toml", "if"]);
    assert_contains(
        &err("[[include]]\nif = \"dir:/x\"\npath = \"a\"\nwhen = 1\n"),
        &["/g.toml", "when", "`if`", "`path`"],
    );
    assert_contains(
        &err("[include]\nif = \"dir:/x\"\n"),
        &["/g.toml", "include"],
    );
}

#[test]
fn a_project_file_may_not_include() {
    let h = Home::new();
    let text = "[[include]]\nif = \"dir:/**\"\npath = \"/etc/x.toml\"\n";
    let file = h.project.join(".airlock.toml");
    common::write(&file, text);
    // `trust add` refuses it...
    let mut store = TrustStore::load(&h.paths.trust_file()).expect("store");
    let err = store.add(&h.project).expect_err("refused");
    assert!(matches!(err, ConfigError::IncludeInProject { .. }), "{err}");
    assert_contains(
        &err.to_string(),
        &[
            &file.display().to_string(),
            "[[include]] is honoured only in the global config",
        ],
    );
    // ...and so does loading, should the store pin it anyway.
    common::write(&file, "");
    store.add(&h.project).expect("trust");
    store.save().expect("save");
    let json = fs::read_to_string(h.paths.trust_file()).expect("store");
    let pinned = json.replace(
        &airlock_config::sha256_hex(b""),
        &airlock_config::sha256_hex(text.as_bytes()),
    );
    fs::write(h.paths.trust_file(), pinned).expect("store");
    common::write(&file, text);
    let msg = h.load_err();
    assert_contains(
        &msg,
        &[
            &file.display().to_string(),
            "honoured only in the global config",
        ],
    );
}

#[test]
fn an_included_file_may_not_include_or_hold_bridge_settings() {
    let h = Home::new();
    let global = h.global("[[include]]\nif = \"dir:~/**\"\npath = \"a.toml\"\n");
    let a = h.file(
        ".config/airlock/a.toml",
        "[[include]]\nif = \"dir:~/**\"\npath = \"b.toml\"\n",
    );
    h.file(".config/airlock/b.toml", "");
    let msg = h.load_err();
    assert_contains(
        &msg,
        &[
            &format!("{} (included by {})", a.display(), global.display()),
            "one level deep",
        ],
    );
    h.file(".config/airlock/a.toml", "[bridge]\nshared_token = true\n");
    let msg = h.load_err();
    assert_contains(
        &msg,
        &[
            &a.display().to_string(),
            "[bridge]",
            "only in the global config",
        ],
    );
}

#[test]
fn an_included_file_may_not_live_where_a_sandbox_writes() {
    let h = Home::new();
    let global =
        h.global("[[include]]\nif = \"dir:~/work/**\"\npath = \"~/work/app/extra.toml\"\n");
    h.file("work/app/extra.toml", "");
    let msg = h.load_err();
    assert_contains(
        &msg,
        &[
            &global.display().to_string(),
            &format!("is inside {}", h.project.display()),
            "without `airlock trust`",
        ],
    );
    h.global(
        "[[include]]\nif = \"dir:~/work/**\"\npath = \"~/.local/share/airlock/sandboxes/x/home/a.toml\"\n",
    );
    let msg = h.load_err();
    assert_contains(&msg, &["sandboxes", "which a sandbox can write"]);
}

#[test]
fn an_include_with_an_invalid_file_names_that_file() {
    let h = Home::new();
    h.global("[[include]]\nif = \"dir:~/work/**\"\npath = \"w.toml\"\n");
    let w = h.file(".config/airlock/w.toml", "[sandbox]\nnetwrk = 1\n");
    let msg = h.load_err();
    assert_contains(&msg, &[&w.display().to_string(), "netwrk"]);
}
