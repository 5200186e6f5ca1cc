//! `code PATH...` / `codium PATH...`: POST /edit once per path, with the path the host sees.
//!
//! The project has the same path on both sides and passes unchanged; a path in the synthetic home
//! maps to the sandbox's home dir on the host; anything else (a tmpfs, a system path, an overlay)
//! has no host path and is refused. Flags are refused rather than silently dropped. Exits non-zero
//! on any failure: an editor command is interactive, and a false success would mislead.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use super::post;

/// Set inside a sandbox: the project root (same path on the host).
pub const PROJECT_ENV: &str = "AIRLOCK_PROJECT_DIR";
/// Set inside a sandbox: the host directory behind the synthetic home.
pub const HOME_ON_HOST_ENV: &str = "AIRLOCK_HOST_HOME_DIR";

/// Where sandbox paths live on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathMap {
    pub project: PathBuf,
    /// The home path inside the sandbox.
    pub home: PathBuf,
    /// The directory that holds it on the host.
    pub home_on_host: PathBuf,
}

impl PathMap {
    fn from_env() -> Result<PathMap, String> {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .ok_or_else(|| {
                    format!("{name} is not set: run this inside an airlock sandbox (airlock run)")
                })
        };
        Ok(PathMap {
            project: var(PROJECT_ENV)?,
            home: var("HOME")?,
            home_on_host: var(HOME_ON_HOST_ENV)?,
        })
    }
}

/// The host path of `path` (absolute, already resolved), or why there is none.
pub fn translate(map: &PathMap, path: &Path) -> Result<PathBuf, String> {
    if path.starts_with(&map.project) {
        return Ok(path.to_owned());
    }
    if let Ok(rest) = path.strip_prefix(&map.home) {
        return Ok(if rest.as_os_str().is_empty() {
            map.home_on_host.clone()
        } else {
            map.home_on_host.join(rest)
        });
    }
    let shown = path.display();
    for tmpfs in ["/tmp", "/var/tmp", "/run", "/dev"] {
        if path.starts_with(tmpfs) {
            return Err(format!(
                "{shown} is on a tmpfs that exists only inside the sandbox; the host cannot open it"
            ));
        }
    }
    Err(format!(
        "{shown} is outside the project ({}) and the sandbox home: it is a system, overlay or \
         sandbox-only path with no host path to open",
        map.project.display()
    ))
}

/// `path` made absolute against `cwd` with every existing symlink resolved (like `realpath -m`).
pub fn resolve(cwd: &Path, path: &Path) -> PathBuf {
    let joined = cwd.join(path);
    let mut lexical = PathBuf::from("/");
    for component in joined.components() {
        match component {
            Component::Normal(name) => lexical.push(name),
            Component::ParentDir => {
                lexical.pop();
            }
            _ => {}
        }
    }
    // The longest existing ancestor is resolved; the rest is appended as written.
    let mut existing = lexical.clone();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = airlock_config::canonicalize(&existing) {
            let mut out = real;
            for name in rest.iter().rev() {
                out.push(name);
            }
            return out;
        }
        match (
            existing.file_name().map(ToOwned::to_owned),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_owned();
            }
            _ => return lexical,
        }
    }
}

pub fn run(name: &str, args: &[OsString]) -> i32 {
    if args.is_empty() {
        eprintln!("{name}: give a path to open on the host, e.g. `{name} .`");
        return 2;
    }
    if let Some(flag) = args.iter().find(|a| a.to_string_lossy().starts_with('-')) {
        eprintln!(
            "{name}: {} is not supported through the airlock bridge (only paths are); nothing was opened",
            flag.to_string_lossy()
        );
        return 2;
    }
    let map = match PathMap::from_env() {
        Ok(map) => map,
        Err(reason) => {
            eprintln!("{name}: {reason}");
            return 1;
        }
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| map.project.clone());
    let mut failed = false;
    for arg in args {
        let resolved = resolve(&cwd, Path::new(arg));
        let host = match translate(&map, &resolved) {
            Ok(host) => host,
            Err(reason) => {
                eprintln!("{name}: {reason}");
                failed = true;
                continue;
            }
        };
        let body = serde_json::json!({ "editor": name, "path": host.to_string_lossy() });
        match post("/edit", &body, Duration::from_secs(15)) {
            Ok(answer) if answer.status == 204 => {}
            Ok(answer) if answer.status == 404 => {
                eprintln!(
                    "{name}: the host's airlock bridge has no /edit; update the host airlock"
                );
                failed = true;
            }
            Ok(answer) => {
                eprintln!("{name}: {} (HTTP {})", answer.text(), answer.status);
                failed = true;
            }
            Err(e) => {
                eprintln!("{name}: {e}");
                failed = true;
            }
        }
    }
    i32::from(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> PathMap {
        PathMap {
            project: "/home/dev/code/app".into(),
            home: "/home/dev".into(),
            home_on_host: "/home/dev/.local/share/airlock/sandboxes/app-1234abcd/home".into(),
        }
    }

    #[test]
    fn project_paths_pass_unchanged() {
        let m = map();
        for p in ["/home/dev/code/app", "/home/dev/code/app/src/main.rs"] {
            assert_eq!(translate(&m, Path::new(p)).unwrap(), Path::new(p));
        }
    }

    #[test]
    fn home_paths_map_to_the_sandbox_home() {
        let m = map();
        assert_eq!(
            translate(&m, Path::new("/home/dev/.bashrc")).unwrap(),
            Path::new("/home/dev/.local/share/airlock/sandboxes/app-1234abcd/home/.bashrc")
        );
        assert_eq!(
            translate(&m, Path::new("/home/dev")).unwrap(),
            m.home_on_host
        );
        // A sibling that merely shares the prefix is not in the home.
        assert!(translate(&m, Path::new("/home/devil/x")).is_err());
    }

    #[test]
    fn other_paths_are_refused_with_a_reason() {
        let m = map();
        let tmp = translate(&m, Path::new("/tmp/x")).unwrap_err();
        assert!(tmp.contains("tmpfs"), "{tmp}");
        let sys = translate(&m, Path::new("/usr/share/doc")).unwrap_err();
        assert!(sys.contains("no host path"), "{sys}");
    }

    #[test]
    fn resolve_is_realpath_m() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(real.join("a")).unwrap();
        std::os::unix::fs::symlink(real.join("a"), real.join("link")).unwrap();
        assert_eq!(resolve(&real, Path::new(".")), real);
        assert_eq!(
            resolve(&real, Path::new("link/new/file")),
            real.join("a/new/file")
        );
        assert_eq!(resolve(&real, Path::new("a/../a/x")), real.join("a/x"));
        assert_eq!(
            resolve(Path::new("/"), Path::new("/nonexistent-xyz/f")),
            Path::new("/nonexistent-xyz/f")
        );
    }
}
