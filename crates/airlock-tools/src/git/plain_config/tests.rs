use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::git::identity::parse_list;

/// Every git here: a machine often has two (a distribution's and one in /usr/local), and the
/// reader must agree with whichever `PATH` finds first.
fn gits() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = ["/usr/local/bin/git", "/usr/bin/git"]
        .iter()
        .map(PathBuf::from)
        .filter(|git| git.exists())
        .collect();
    if found.is_empty() {
        eprintln!("skipped: git is not installed (the reference this reader is checked against)");
    }
    found.dedup();
    found
}

/// What the real git makes of the global config under `home` (with `extra` variables), for every
/// git here; all must agree.
fn git_list(home: &Path, extra: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    let lists: Vec<_> = gits()
        .iter()
        .map(|git| one_git_list(git, home, extra))
        .collect();
    assert!(
        lists.windows(2).all(|w| w[0] == w[1]),
        "the gits disagree: {lists:?}"
    );
    lists.into_iter().next().flatten()
}

fn one_git_list(
    git: &Path,
    home: &Path,
    extra: &[(&str, &str)],
) -> Option<BTreeMap<String, String>> {
    let out = Command::new(git)
        .args(["config", "--global", "--includes", "--null", "--list"])
        .current_dir("/")
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .envs(extra.iter().copied())
        .output()
        .ok()?;
    (out.status.success() || out.stdout.is_empty()).then(|| parse_list(&out.stdout))
}

fn have_git() -> bool {
    !gits().is_empty()
}

fn view(home: &Path, extra: &[(&str, &str)]) -> HostView {
    let mut env: BTreeMap<String, String> = extra
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    env.insert("HOME".into(), home.display().to_string());
    HostView::new(home, env)
}

/// Plain configs: the reader must take each (not hand it to git) and agree with git exactly.
const PLAIN: &[&str] = &[
    "[user]\n\tname = Ann Example\n\temail = ann@example.com\n",
    "[user]\nname=Ann\n[User]\nNAME = Bob\n",
    "# comment\n; another\n[core]\n\texcludesFile = ~/.gitignore_global # trailing\n\thooksPath = /opt/hooks ; why\n",
    "[user]\n\tname = \"  Spaces \t Inside  \"\n\temail = a   b  c   \t\n",
    "[user]\n\tname = \"quo\\\"te\" and \\\\ back \\t tab \\n nl \\b bs\n",
    "[user]\n\tname = first \\\n  continued \\\n  again\n",
    "[commit]\n\tgpgsign\n[tag]\n\tgpgSign = false\n[gpg]\n\tformat = ssh\n",
    "[user]\n\tname =\n\temail = \"\"\n\tsigningkey = \"\" ABC\n",
    "[url \"git@github.com:\"]\n\tinsteadOf = https://github.com/\n[Remote.Origin]\n\tfetch = x\n",
    "[branch \"Main\"]\n\tremote = origin\n[a.B \"C\"]\n\tkey = v\n",
    "[user] # the user\n\tname = \"a # not a comment ; nor this\" # but this\n",
    "\n\n   [core]   \n  \t attributesfile = /x/attrs\n\n",
    "[core]\n\tpager = less -R\n[core]\n\tpager = delta\n",
    "[alias]\n\tlg = \"log --graph --pretty=format:'%h %s'\"\n\tst = status -sb\n",
    "[user]\n\tname = Ünïcødé Ñame\n",
    "[CORE]\n\tHOOKSPATH = .githooks\n[core \"x\"]\n\thooksPath = /not/this\n",
    "",
];

/// Not plain: the reader hands these to git (includes, syntax it does not take).
const NOT_PLAIN: &[&str] = &[
    "[include]\n\tpath = other\n",
    "[includeIf \"gitdir:~/work/\"]\n\tpath = ~/work.gitconfig\n",
    "[IncludeIf \"onbranch:main\"]\n\tpath = x\n",
    "[user] name = Ann\n",
    "[user]\r\n\tname = Ann\r\n",
    "\u{feff}[user]\n\tname = Ann\n",
    "[user]\n\tname = \"unterminated\n",
    "[user]\n\tname = bad \\q escape\n",
    "name = outside a section\n",
    "[user]\n\tname # comment\n",
    "[]\n\tname = x\n",
    "[user]\n\temail = a\tb\n",
    "[x \"sub\\\"q\"]\n\tkey = v\n",
];

#[test]
fn plain_configs_are_read_as_git_reads_them() {
    if !have_git() {
        return;
    }
    for text in PLAIN {
        let home = tempfile::tempdir().expect("tempdir");
        std::fs::write(home.path().join(".gitconfig"), text).expect("write");
        let ours = read(&view(home.path(), &[])).unwrap_or_else(|| panic!("not plain: {text:?}"));
        let git = git_list(home.path(), &[]).expect("git reads it");
        assert_eq!(ours, git, "config {text:?}");
    }
}

#[test]
fn includes_and_odd_syntax_are_left_to_git() {
    for text in NOT_PLAIN {
        let home = tempfile::tempdir().expect("tempdir");
        std::fs::write(home.path().join(".gitconfig"), text).expect("write");
        assert_eq!(read(&view(home.path(), &[])), None, "config {text:?}");
    }
}

#[test]
fn home_gitconfig_wins_over_the_xdg_file_and_git_config_global_over_both() {
    if !have_git() {
        return;
    }
    let home = tempfile::tempdir().expect("tempdir");
    let xdg = home.path().join("xdg");
    std::fs::create_dir_all(xdg.join("git")).expect("mkdir");
    std::fs::write(
        xdg.join("git/config"),
        "[user]\n\tname = From XDG\n\temail = xdg@example.com\n",
    )
    .expect("write");
    let xdg_var = [("XDG_CONFIG_HOME", xdg.to_str().expect("utf-8"))];
    // Only the XDG file: it is read.
    let ours = read(&view(home.path(), &xdg_var)).expect("plain");
    assert_eq!(ours["user.email"], "xdg@example.com");
    assert_eq!(Some(ours), git_list(home.path(), &xdg_var));
    // With ~/.gitconfig: only that one, as `git config --global` reads it.
    std::fs::write(
        home.path().join(".gitconfig"),
        "[user]\n\tname = From Home\n",
    )
    .expect("write");
    let ours = read(&view(home.path(), &xdg_var)).expect("plain");
    assert_eq!(ours["user.name"], "From Home");
    assert!(!ours.contains_key("user.email"), "{ours:?}");
    assert_eq!(Some(ours), git_list(home.path(), &xdg_var));

    let only = home.path().join("only.gitconfig");
    std::fs::write(&only, "[user]\n\tname = Only\n").expect("write");
    let global_var = [("GIT_CONFIG_GLOBAL", only.to_str().expect("utf-8"))];
    let ours = read(&view(home.path(), &global_var)).expect("plain");
    assert_eq!(ours["user.name"], "Only");
    assert_eq!(Some(ours), git_list(home.path(), &global_var));

    // No global config at all: nothing, as git says.
    let empty = tempfile::tempdir().expect("tempdir");
    assert_eq!(read(&view(empty.path(), &[])), Some(BTreeMap::new()));
    assert_eq!(git_list(empty.path(), &[]), Some(BTreeMap::new()));
}

#[test]
fn a_file_it_cannot_read_plainly_is_left_to_git() {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(home.path().join(".gitconfig")).expect("a directory");
    assert_eq!(read(&view(home.path(), &[])), None);
    let relative = [("GIT_CONFIG_GLOBAL", "relative/config")];
    assert_eq!(read(&view(home.path(), &relative)), None);
    let relative_xdg = [("XDG_CONFIG_HOME", "relative")];
    assert_eq!(read(&view(home.path(), &relative_xdg)), None);
}
