//! The `.git/config` guard, with the real git.

mod fixture;
mod git_support;

use std::process::Command;

use airlock_tools::guard_git_config;
use fixture::{Fixture, settings};
use git_support::{git, real_git, repo};

fn set(f: &Fixture, key: &str, value: &str) {
    git(&f.project, &["config", "--add", key, value]);
}

fn get_all(f: &Fixture, key: &str) -> Vec<String> {
    let out = Command::new(real_git())
        .args(["config", "--file", ".git/config", "--get-all", key])
        .current_dir(&f.project)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn guard_reverts_added_program_keys_and_says_which() {
    let f = repo();
    set(&f, "alias.st", "status");
    let guard = guard_git_config(&f.project);
    set(&f, "alias.x", "!touch /tmp/pwned");
    set(&f, "core.fsmonitor", "/tmp/evil");
    set(&f, "filter.lfs.smudge", "evil %f");
    set(&f, "includeIf.gitdir:/.path", "/tmp/evil.cfg");
    set(&f, "alias.lg", "log --oneline");
    set(&f, "user.name", "Changed Inside");
    let mut messages = guard.finish();
    messages.sort();
    assert_eq!(messages.len(), 4, "{messages:#?}");
    let config = f.project.join(".git/config");
    for (msg, key) in messages.iter().zip([
        "alias.x",
        "core.fsmonitor",
        "filter.lfs.smudge",
        "includeif.gitdir:/.path",
    ]) {
        assert_eq!(
            msg,
            &format!(
                "reverted {key} in {}: the sandbox added it, and it makes git run a program on your host; \
                 set [tools.git] trust_config_changes = true to keep such changes",
                config.display()
            )
        );
    }
    for key in [
        "alias.x",
        "core.fsmonitor",
        "filter.lfs.smudge",
        "includeIf.gitdir:/.path",
    ] {
        assert!(get_all(&f, key).is_empty(), "{key} still set");
    }
    // Harmless changes stay.
    assert_eq!(get_all(&f, "alias.lg"), ["log --oneline"]);
    assert_eq!(get_all(&f, "user.name"), ["Changed Inside"]);
    assert_eq!(get_all(&f, "alias.st"), ["status"]);
}

#[test]
fn guard_restores_changed_values_of_existing_program_keys() {
    let f = repo();
    set(&f, "core.pager", "less -R");
    set(&f, "credential.helper", "cache");
    set(&f, "credential.helper", "store");
    let guard = guard_git_config(&f.project);
    git(&f.project, &["config", "core.pager", "sh -c evil"]);
    git(
        &f.project,
        &["config", "--add", "credential.helper", "!evil"],
    );
    let messages = guard.finish();
    assert_eq!(messages.len(), 2, "{messages:#?}");
    assert!(
        messages
            .iter()
            .all(|m| m.contains("the sandbox changed it")),
        "{messages:#?}"
    );
    assert_eq!(get_all(&f, "core.pager"), ["less -R"]);
    assert_eq!(get_all(&f, "credential.helper"), ["cache", "store"]);
}

#[test]
fn guard_with_no_changes_or_no_repository_says_nothing() {
    let f = repo();
    set(&f, "core.editor", "vim");
    assert!(guard_git_config(&f.project).finish().is_empty());
    let plain = Fixture::new();
    assert!(guard_git_config(&plain.project).finish().is_empty());
}

#[test]
fn guard_restores_a_config_replaced_by_a_symlink_or_garbage() {
    let f = repo();
    let config = f.project.join(".git/config");
    let before = std::fs::read(&config).unwrap();
    let guard = guard_git_config(&f.project);
    std::fs::remove_file(&config).unwrap();
    std::os::unix::fs::symlink(f.h(".bashrc"), &config).unwrap();
    let messages = guard.finish();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].starts_with("restored "), "{messages:?}");
    assert!(
        !std::fs::symlink_metadata(&config)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(&config).unwrap(), before);

    let guard = guard_git_config(&f.project);
    std::fs::write(&config, "[core\nfsmonitor = x").unwrap();
    assert_eq!(guard.finish().len(), 1);
    assert_eq!(std::fs::read(&config).unwrap(), before);
}

#[test]
fn program_keys_are_recognised_by_shape() {
    use airlock_tools::git::guard::runs_program;
    for (key, value) in [
        ("core.hookspath", "/x"),
        ("core.sshcommand", "ssh"),
        ("core.editor", "vim"),
        ("sequence.editor", "vim"),
        ("gpg.program", "gpg"),
        ("gpg.ssh.program", "x"),
        ("diff.pdf.textconv", "x"),
        ("diff.external", "x"),
        ("merge.ours.driver", "x"),
        ("include.path", "x"),
        ("pager.log", "x"),
        ("alias.a", "  !x"),
        ("remote.origin.uploadpack", "x"),
        ("protocol.ext.allow", "always"),
        ("extensions.worktreeconfig", "true"),
    ] {
        assert!(runs_program(key, value), "{key}");
    }
    for (key, value) in [
        ("alias.a", "log"),
        ("user.name", "!x"),
        ("core.autocrlf", "true"),
        ("filter.lfs", "x"),
        ("merge.conflictstyle", "diff3"),
        ("remote.origin.url", "x"),
    ] {
        assert!(!runs_program(key, value), "{key}");
    }
}

#[test]
fn the_guard_is_wanted_only_where_git_config_is_writable() {
    use airlock_tools::wants_config_guard;
    assert!(!wants_config_guard(&settings("").unwrap()));
    assert!(wants_config_guard(
        &settings("[tools.git]\nmode = \"readwrite\"\n").unwrap()
    ));
    assert!(!wants_config_guard(
        &settings("[tools.git]\nmode = \"readwrite\"\ntrust_config_changes = true\n").unwrap()
    ));
    assert!(!wants_config_guard(
        &settings("[tools.git]\nmode = \"disabled\"\n").unwrap()
    ));
}

#[test]
fn guard_leaves_a_replaced_git_dir_alone_and_says_so() {
    let f = repo();
    let host_file = f.file(".config/git/config", "[core]\n\tpager = less\n");
    let guard = guard_git_config(&f.project);
    let git_dir = f.project.join(".git");
    std::fs::rename(&git_dir, f.project.join("moved")).unwrap();
    // A `.git` pointing at a host directory: writing "back" there would change a host file.
    std::os::unix::fs::symlink(f.h(".config/git"), &git_dir).unwrap();
    std::fs::write(&host_file, "[core]\n\tpager = evil\n").unwrap();
    let messages = guard.finish();
    assert_eq!(
        messages,
        [format!(
            "{} was replaced during the session; airlock left it untouched: inspect it (hooks, \
             config) before using git on this project",
            git_dir.display()
        )]
    );
    assert_eq!(
        std::fs::read_to_string(&host_file).unwrap(),
        "[core]\n\tpager = evil\n"
    );
}
