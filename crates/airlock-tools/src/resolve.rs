//! What a tool's binary in the home needs to run inside, found the way the host finds it.
//!
//! The sandbox replaces the home, so a binary under it (`~/.local/bin/codex`, nvm's `node`, a pyenv
//! shim) is absent inside unless mounted, and mounting only the file is not enough: a node CLI
//! `require`s its package and its dependencies, nvm's `npm` is a link into the version's
//! `lib/node_modules`, a pyenv shim runs `pyenv` from its root. So from the binary this follows
//! links and `#!` lines to what really runs, and mounts the smallest directory that holds it:
//!
//! - a file in a node package (`…/node_modules/<pkg>/…`) installed in a global prefix
//!   (`npm install -g --prefix ~/.local`, `~/.npm-global`): the prefix's `lib/node_modules` and
//!   `bin` as overlays (the host's packages visible, installs inside stay in the sandbox);
//! - a file in the `bin/` of a versioned install (nvm, fnm, volta, asdf, mise, pyenv, uv, pipx,
//!   rustup: at least three levels below the home) or of bun or deno: that install, read-only;
//! - a pyenv shim: pyenv's root, read-only (installs go to a venv or `pip install --user`);
//! - anything else under the home: the resolved file at the binary's path, read-only.
//!
//! A root that is the home itself or one of its broad directories (`~/.local`, `~/.config`, …) is
//! never mounted: the binary is then skipped with a warning naming the path.

use std::path::{Path, PathBuf};

use airlock_sandbox::{ToolMount, ToolMountMode};

use crate::host::HostView;

/// Directories of the home too broad to mount for one binary: they hold other programs' data,
/// keyrings, credentials (`~/.cargo/credentials.toml`).
const BROAD: &[&str] = &[
    "",
    ".local",
    ".local/share",
    ".local/state",
    ".config",
    ".cache",
    ".cargo",
    "bin",
];

/// Single-directory runtimes whose `bin/` may be mounted with their root.
const RUNTIME_ROOTS: &[&str] = &[".bun", ".deno"];

/// How many `#!` interpreters are followed from one binary.
const MAX_HOPS: usize = 3;

/// The mounts `binary` (found on the host's `PATH`) needs inside; `planned` are the mounts already
/// planned (a binary they cover needs nothing more). Problems go to `warnings`.
pub fn binary_mounts(
    tool: &str,
    binary: &Path,
    host: &HostView,
    planned: &[ToolMount],
    warnings: &mut Vec<String>,
) -> Vec<ToolMount> {
    let mut out: Vec<ToolMount> = Vec::new();
    let covered =
        |p: &Path, out: &[ToolMount]| planned.iter().chain(out).any(|m| p.starts_with(&m.target));
    let mut next = Some(binary.to_path_buf());
    for _ in 0..MAX_HOPS {
        let Some(current) = next.take() else {
            break;
        };
        if !current.starts_with(&host.home) {
            break;
        }
        let resolved = match airlock_config::canonicalize(&current) {
            Ok(resolved) => resolved,
            Err(e) => {
                warnings.push(format!(
                    "tool {tool}: {} cannot be resolved ({e}); it is not mounted",
                    host.tilde(&current)
                ));
                break;
            }
        };
        match root_of(&current, &resolved, host) {
            Root::Mount { dirs, mode } => {
                for dir in dirs {
                    if !covered(&dir, &out) {
                        out.push(mount(tool, &dir, mode, true));
                    }
                }
            }
            Root::Broad(root) => {
                warnings.push(format!(
                    "tool {tool}: {} runs from {}, which is too broad to mount; it is not mounted \
                     (mount what it needs with [[sandbox.mounts]])",
                    host.tilde(&current),
                    host.tilde(&root)
                ));
                break;
            }
            Root::File => {
                if !covered(&current, &out) {
                    out.push(ToolMount {
                        target: current.clone(),
                        ..mount(tool, &resolved, ToolMountMode::Readonly, false)
                    });
                } else if resolved.starts_with(&host.home) && !covered(&resolved, &out) {
                    out.push(mount(tool, &resolved, ToolMountMode::Readonly, false));
                }
            }
        }
        next = interpreter(&resolved);
    }
    out
}

fn mount(tool: &str, path: &Path, mode: ToolMountMode, is_dir: bool) -> ToolMount {
    ToolMount {
        tool: tool.to_owned(),
        source: path.to_path_buf(),
        target: path.to_path_buf(),
        mode,
        is_dir,
    }
}

/// Where a binary runs from.
#[derive(Debug, PartialEq, Eq)]
enum Root {
    /// These directories, in this mode.
    Mount {
        dirs: Vec<PathBuf>,
        mode: ToolMountMode,
    },
    /// Only this directory would hold it, and it is too broad.
    Broad(PathBuf),
    /// Nothing recognised: the file alone.
    File,
}

fn under_home<'a>(path: &'a Path, host: &HostView) -> Option<&'a Path> {
    path.strip_prefix(&host.home).ok()
}

fn is_broad(dir: &Path, host: &HostView) -> bool {
    under_home(dir, host).is_some_and(|rel| BROAD.iter().any(|b| rel == Path::new(b)))
}

fn root_of(binary: &Path, resolved: &Path, host: &HostView) -> Root {
    if !resolved.starts_with(&host.home) {
        return Root::File;
    }
    if let Some(prefix) = node_prefix(resolved) {
        let dirs = vec![prefix.join("lib/node_modules"), prefix.join("bin")];
        return Root::Mount {
            dirs,
            mode: ToolMountMode::Overlay,
        };
    }
    if let Some(package) = node_package(resolved) {
        return Root::Mount {
            dirs: vec![package],
            mode: ToolMountMode::Readonly,
        };
    }
    if let Some(pyenv) = pyenv_root(binary) {
        return if is_broad(&pyenv, host) {
            Root::Broad(pyenv)
        } else {
            Root::Mount {
                dirs: vec![pyenv],
                mode: ToolMountMode::Readonly,
            }
        };
    }
    let Some(install) = resolved
        .parent()
        .filter(|bin| bin.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent)
    else {
        return Root::File;
    };
    let Some(rel) = under_home(install, host) else {
        return Root::File;
    };
    let depth = rel.components().count();
    if is_broad(install, host) {
        return Root::File;
    }
    if depth >= 3 || RUNTIME_ROOTS.iter().any(|r| rel == Path::new(r)) {
        return Root::Mount {
            dirs: vec![install.to_path_buf()],
            mode: ToolMountMode::Readonly,
        };
    }
    Root::File
}

/// The package directory holding `file`: the nearest `node_modules/<pkg>` or
/// `node_modules/@scope/<pkg>` ancestor with a `package.json`.
fn node_package(file: &Path) -> Option<PathBuf> {
    file.ancestors().skip(1).find_map(|dir| {
        let parent = dir.parent()?;
        let in_modules = parent.file_name()? == "node_modules"
            || (parent.file_name()?.to_str()?.starts_with('@')
                && parent.parent()?.file_name()? == "node_modules");
        (in_modules && dir.join("package.json").is_file()).then(|| dir.to_path_buf())
    })
}

/// The npm global prefix holding `file`: `<prefix>/lib/node_modules/<pkg>/…` with `<prefix>/bin`.
fn node_prefix(file: &Path) -> Option<PathBuf> {
    let package = node_package(file)?;
    let modules = package
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))?;
    let lib = modules
        .parent()
        .filter(|l| l.file_name().is_some_and(|n| n == "lib"))?;
    let prefix = lib.parent()?;
    prefix.join("bin").is_dir().then(|| prefix.to_path_buf())
}

/// pyenv's root when `binary` is one of its shims (`<root>/shims/<name>`, `<root>/libexec/pyenv`).
fn pyenv_root(binary: &Path) -> Option<PathBuf> {
    let shims = binary
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "shims"))?;
    let root = shims.parent()?;
    root.join("libexec/pyenv")
        .is_file()
        .then(|| root.to_path_buf())
}

/// The absolute interpreter of a `#!` script (`/usr/bin/env` resolves on `PATH` inside, so it
/// is not followed).
fn interpreter(file: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let program = std::str::from_utf8(line).ok()?.split_whitespace().next()?;
    let program = Path::new(program);
    (program.is_absolute() && !program.starts_with("/usr") && !program.starts_with("/bin"))
        .then(|| program.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    struct Home {
        _dir: tempfile::TempDir,
        host: HostView,
    }

    fn home() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let home = fs::canonicalize(dir.path()).unwrap();
        let host = HostView::new(&home, Default::default());
        Home { _dir: dir, host }
    }

    fn file(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn mounts(h: &Home, binary: &Path) -> (Vec<(PathBuf, ToolMountMode)>, Vec<String>) {
        let mut warnings = Vec::new();
        let found = binary_mounts("t", binary, &h.host, &[], &mut warnings)
            .into_iter()
            .map(|m| (m.target, m.mode))
            .collect();
        (found, warnings)
    }

    #[test]
    fn a_global_npm_prefix_brings_its_packages_and_bin() {
        let h = home();
        let prefix = h.host.home.join(".local");
        let js = prefix.join("lib/node_modules/@openai/codex/bin/codex.js");
        file(&js, "#!/usr/bin/env node\n");
        file(
            &prefix.join("lib/node_modules/@openai/codex/package.json"),
            "{}",
        );
        let bin = prefix.join("bin/codex");
        fs::create_dir_all(bin.parent().unwrap()).unwrap();
        symlink("../lib/node_modules/@openai/codex/bin/codex.js", &bin).unwrap();
        let (found, warnings) = mounts(&h, &bin);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            found,
            vec![
                (prefix.join("lib/node_modules"), ToolMountMode::Overlay),
                (prefix.join("bin"), ToolMountMode::Overlay),
            ]
        );
    }

    #[test]
    fn a_version_manager_install_is_mounted_whole_and_read_only() {
        let h = home();
        let version = h.host.home.join(".nvm/versions/node/v20.1.0");
        file(&version.join("bin/node"), "ELF");
        let (found, _) = mounts(&h, &version.join("bin/node"));
        assert_eq!(found, vec![(version, ToolMountMode::Readonly)]);
    }

    #[test]
    fn a_pyenv_shim_brings_pyenv() {
        let h = home();
        let root = h.host.home.join(".pyenv");
        file(&root.join("libexec/pyenv"), "#!/bin/bash\n");
        file(&root.join("shims/python3"), "#!/usr/bin/env bash\n");
        let (found, _) = mounts(&h, &root.join("shims/python3"));
        assert_eq!(found, vec![(root, ToolMountMode::Readonly)]);
    }

    #[test]
    fn an_interpreter_in_the_home_is_followed() {
        let h = home();
        let venv = h.host.home.join(".local/share/pipx/venvs/tool");
        file(&venv.join("bin/python"), "ELF");
        let script = h.host.home.join(".local/bin/tool");
        file(
            &script,
            &format!("#!{}\nimport tool\n", venv.join("bin/python").display()),
        );
        let (found, _) = mounts(&h, &script);
        assert_eq!(
            found,
            vec![
                (script.clone(), ToolMountMode::Readonly),
                (venv, ToolMountMode::Readonly),
            ]
        );
    }

    #[test]
    fn broad_roots_and_loops_are_refused_with_a_warning() {
        let h = home();
        // ~/.cargo/bin/x: its root would be ~/.cargo (credentials.toml): only the file.
        let cargo_bin = h.host.home.join(".cargo/bin/x");
        file(&cargo_bin, "ELF");
        let (found, _) = mounts(&h, &cargo_bin);
        assert_eq!(found, vec![(cargo_bin, ToolMountMode::Readonly)]);
        // A shim dir whose root is the home itself.
        file(&h.host.home.join("libexec/pyenv"), "");
        file(&h.host.home.join("shims/python3"), "");
        let (found, warnings) = mounts(&h, &h.host.home.join("shims/python3"));
        assert!(found.is_empty(), "{found:?}");
        assert!(warnings[0].contains("too broad"), "{warnings:?}");
        // A link loop.
        let a = h.host.home.join("bin-a");
        symlink(h.host.home.join("bin-b"), &a).unwrap();
        symlink(&a, h.host.home.join("bin-b")).unwrap();
        let (found, warnings) = mounts(&h, &a);
        assert!(found.is_empty());
        assert!(warnings[0].contains("cannot be resolved"), "{warnings:?}");
    }
}
