//! Shell integration: the tools' shell init lines (mise activation, prompt markers) run inside the
//! sandbox after the user's own startup files, which stay read-only and untouched.
//!
//! - zsh: `ZDOTDIR` points at airlock's directory, whose startup files source the user's and then,
//!   at the end of `.zshrc`, the init lines (so a theme set in `~/.zshrc` gets its marker).
//! - bash: when airlock starts the shell itself, `--rcfile` names airlock's rc, which sources
//!   `/etc/bash.bashrc` and `~/.bashrc` first.
//! - fish: a vendor `conf.d` snippet found through `XDG_DATA_DIRS`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use airlock_sandbox::{Contributions, GeneratedFile};

use crate::catalog::Catalog;
use crate::host::HostView;
use crate::plan::shell_init;
use crate::settings::Settings;
use crate::tool::Shell;

/// Where airlock's shell integration files appear inside the sandbox (a tmpfs, not the home).
pub const SHELL_DIR: &str = "/run/airlock/shell";

/// Adds the shell integration of every shell with init lines to `out`.
pub fn integrate(catalog: &Catalog, settings: &Settings, host: &HostView, out: &mut Contributions) {
    for shell in Shell::ALL {
        let lines = shell_init(catalog, settings, host, shell);
        if lines.is_empty() {
            continue;
        }
        let body = init_block(&lines);
        match shell {
            Shell::Zsh => zsh(host, &body, out),
            Shell::Bash => bash(&body, out),
            Shell::Fish => fish(host, &body, out),
        }
    }
}

fn init_block(lines: &[(&str, &str)]) -> String {
    let mut body =
        String::from("# Added by airlock: the init lines of the tools found on the host.\n");
    for (tool, line) in lines {
        let _ = writeln!(body, "# {tool}\n{line}");
    }
    body
}

fn file(out: &mut Contributions, target: impl Into<PathBuf>, content: String) {
    out.files.push(GeneratedFile {
        tool: "shell".into(),
        target: target.into(),
        content,
    });
}

/// Single-quotes `path` for a POSIX-style shell.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.to_string_lossy().replace('\'', r"'\''"))
}

fn zsh(host: &HostView, body: &str, out: &mut Contributions) {
    let dir = Path::new(SHELL_DIR).join("zsh");
    let user = host
        .path_var("ZDOTDIR")
        .unwrap_or_else(|| host.home.clone());
    let user = quoted(&user);
    let ours = quoted(&dir);
    let source = |name: &str| format!("[[ -f {user}/{name} ]] && source {user}/{name}\n");
    file(
        out,
        dir.join(".zshenv"),
        format!("{}ZDOTDIR={ours}\n", source(".zshenv")),
    );
    file(
        out,
        dir.join(".zprofile"),
        format!("{}ZDOTDIR={ours}\n", source(".zprofile")),
    );
    // From here on zsh reads the user's files (.zlogin) from the user's own ZDOTDIR.
    file(
        out,
        dir.join(".zshrc"),
        format!("ZDOTDIR={user}\n{}{body}", source(".zshrc")),
    );
    out.env
        .insert("ZDOTDIR".into(), dir.to_string_lossy().into_owned());
}

fn bash(body: &str, out: &mut Contributions) {
    let rc = Path::new(SHELL_DIR).join("bashrc");
    file(
        out,
        &rc,
        format!(
            "[ -f /etc/bash.bashrc ] && . /etc/bash.bashrc\n[ -f ~/.bashrc ] && . ~/.bashrc\n{body}"
        ),
    );
    out.shell_args.insert(
        "bash".into(),
        vec!["--rcfile".into(), rc.to_string_lossy().into_owned()],
    );
}

fn fish(host: &HostView, body: &str, out: &mut Contributions) {
    let share = Path::new(SHELL_DIR).join("share");
    file(
        out,
        share.join("fish/vendor_conf.d/airlock.fish"),
        body.to_owned(),
    );
    let rest = host
        .var("XDG_DATA_DIRS")
        .filter(|v| !v.is_empty())
        .unwrap_or("/usr/local/share:/usr/share");
    out.env.insert(
        "XDG_DATA_DIRS".into(),
        format!("{}:{rest}", share.to_string_lossy()),
    );
}

/// The files and variables of [`integrate`] for one host, keyed for tests.
pub fn summary(out: &Contributions) -> BTreeMap<String, String> {
    out.files
        .iter()
        .filter(|f| f.tool == "shell")
        .map(|f| (f.target.to_string_lossy().into_owned(), f.content.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(shell: &str, home: &Path) -> HostView {
        let env = [
            ("SHELL", shell),
            ("PATH", "/nonexistent"),
            ("HOME", home.to_str().expect("utf8")),
        ];
        HostView::new(
            home,
            env.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn zsh_sources_the_users_files_then_the_markers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        std::fs::create_dir_all(home.join(".oh-my-zsh")).expect("omz");
        std::fs::write(home.join(".zshrc"), "# user\n").expect("zshrc");
        let catalog = Catalog::builtin();
        let settings = Settings::default();
        let mut out = Contributions::default();
        integrate(&catalog, &settings, &host("/bin/zsh", home), &mut out);
        let files = summary(&out);
        let zshrc = &files["/run/airlock/shell/zsh/.zshrc"];
        let user = format!("'{}'", home.display());
        assert!(
            zshrc.starts_with(&format!(
                "ZDOTDIR={user}\n[[ -f {user}/.zshrc ]] && source {user}/.zshrc\n"
            )),
            "{zshrc}"
        );
        assert!(
            zshrc.contains("[sandbox]"),
            "the oh-my-zsh marker comes after: {zshrc}"
        );
        assert!(
            files["/run/airlock/shell/zsh/.zshenv"].ends_with("ZDOTDIR='/run/airlock/shell/zsh'\n")
        );
        assert_eq!(
            out.env.get("ZDOTDIR").map(String::as_str),
            Some("/run/airlock/shell/zsh")
        );
    }

    #[test]
    fn nothing_without_init_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut out = Contributions::default();
        integrate(
            &Catalog::builtin(),
            &Settings::default(),
            &host("/bin/sh", dir.path()),
            &mut out,
        );
        assert!(out.files.is_empty(), "{:?}", out.files);
        assert!(out.env.is_empty() && out.shell_args.is_empty());
    }

    #[test]
    fn quoting_survives_odd_homes() {
        assert_eq!(quoted(Path::new("/home/o'neil")), r"'/home/o'\''neil'");
    }
}
