//! The bridge's config keys: `[sandbox] bridge` layers like any scalar; `[bridge.commands]` is read
//! from the global file only, and a trusted project file that names host commands is refused.

use std::path::Path;

use airlock_bridge::daemon::load_commands;
use airlock_config::{Profile, TrustStore, XdgPaths, load, parse_str};

#[test]
fn bridge_flag_layers_and_commands_come_from_the_global_file_only() {
    let global = parse_str(
        "[sandbox]\nbridge = true\n[bridge.commands.mytool]\nverbs = [\"status\"]\n",
        Path::new("global.toml"),
    )
    .unwrap();
    let project = parse_str("[sandbox]\nbridge = false\n", Path::new(".airlock.toml")).unwrap();
    let profile = Profile::layer(
        Some((Path::new("global.toml"), &global)),
        Some((Path::new(".airlock.toml"), &project)),
    );
    assert!(!profile.bridge);
    assert_eq!(profile.bridge_commands, ["mytool"]);
    assert!(Profile::default().bridge);
    let err = parse_str(
        "[bridge.commands.x]\nverbs = [\"a\"]\nshell = true\n",
        Path::new("g.toml"),
    );
    assert!(err.is_err(), "unknown keys in a command entry are refused");
}

#[test]
fn a_trusted_project_file_naming_host_commands_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(dir.path()).unwrap();
    let project = home.join("code/app");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join(".airlock.toml"),
        "[bridge.commands.rm]\nverbs = [\"-rf\"]\n",
    )
    .unwrap();
    let home_s = home.to_string_lossy().into_owned();
    let paths = XdgPaths::from_vars(|k| (k == "HOME").then(|| home_s.clone())).unwrap();
    let mut store = TrustStore::load(&paths.trust_file()).unwrap();
    // Refused at trust time: a project file with a host section in it is never pinned.
    let err = store.add(&project).unwrap_err().to_string();
    assert!(
        err.contains("[bridge] is a host setting") && err.contains("global config"),
        "{err}"
    );
    // Not trusted, so not loaded: the host commands it names never reach the bridge.
    let loaded = load(&paths, &project).unwrap();
    assert!(loaded.profile.bridge_commands.is_empty());
}

#[test]
fn the_daemon_reads_its_command_table_from_the_global_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    let table = load_commands(&file).unwrap();
    assert_eq!(
        table.names().collect::<Vec<_>>(),
        ["proximo"],
        "missing file: built-ins only"
    );
    std::fs::write(
        &file,
        "[bridge.commands.mytool]\nverbs = [\"logs\"]\ntimeout_secs = 7\n",
    )
    .unwrap();
    let table = load_commands(&file).unwrap();
    assert_eq!(table.commands["mytool"].timeout.as_secs(), 7);
    std::fs::write(&file, "[bridge.commands.mytool]\nverbs = []\n").unwrap();
    let err = load_commands(&file).unwrap_err().to_string();
    assert!(
        err.contains("[bridge.commands.mytool]") && err.contains("verbs"),
        "{err}"
    );
    std::fs::write(&file, "[bridge]\ncommand = 1\n").unwrap();
    assert!(load_commands(&file).is_err());
}
