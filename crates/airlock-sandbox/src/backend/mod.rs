//! Backends: what turns a [`SandboxSpec`] into a running sandbox.
//!
//! Every backend takes the same spec and the same [`Gates`] (the egress proxy, the socket
//! filters), and answers the same way: the workload's [`Outcome`] or a [`LaunchError`]. What a
//! backend cannot honour in a spec is listed by [`Backend::unsupported`] and refuses the launch,
//! so a sandbox is never weaker than the spec says. `docs/backends.md` compares them.

pub mod bwrap;
pub mod container;
pub mod foreground;

use std::path::PathBuf;

pub use airlock_config::BackendKind;

pub use crate::native::{Gates, LaunchError, NoGates, Outcome};
use crate::spec::SandboxSpec;
use crate::state::OverlayLease;

/// One way to launch a spec.
pub trait Backend {
    fn kind(&self) -> BackendKind;

    /// What this backend cannot honour in `spec`, one sentence each naming the feature and the
    /// alternative; a launch with any is refused.
    fn unsupported(&self, spec: &SandboxSpec) -> Vec<String>;

    /// The command lines the backend would run for `spec`, in order (`run --print-spec
    /// --render`): one for bwrap and container, sbx's create, exec and rm; none for native
    /// (it clones itself).
    fn render(&self, spec: &SandboxSpec) -> Result<Vec<Vec<String>>, String>;

    /// Launches `spec`, serves `gates` while it runs, waits for its workload.
    ///
    /// Must be called while the process is single-threaded (see [`crate::native::run`]).
    fn launch(&self, spec: &SandboxSpec, gates: &mut dyn Gates) -> Result<Outcome, LaunchError>;

    /// Takes the session's overlay lease for the next [`Backend::launch`] to let go once the
    /// sandbox's overlays are unmounted, which may be after this process has exited; or gives it
    /// back, and the session lets it go after [`crate::session::end_the_rest`] (the sandbox's
    /// end waited for). Only native takes it: its closer unmounts the tree after airlock's exit.
    fn hold_lease(&self, lease: OverlayLease) -> Option<OverlayLease> {
        Some(lease)
    }
}

/// airlock's own namespaces, root, Landlock and seccomp (`crate::native`), with an init cloned
/// ahead of the plan when the caller made one ([`Native::prestarted`]).
#[derive(Default)]
pub struct Native {
    prestart: std::sync::Mutex<Option<crate::native::Prestart>>,
    lease: std::sync::Mutex<Option<OverlayLease>>,
}

impl Native {
    /// The native backend, launching with `prestart`'s init when the spec fits it.
    pub fn prestarted(prestart: crate::native::Prestart) -> Native {
        Native {
            prestart: std::sync::Mutex::new(Some(prestart)),
            lease: std::sync::Mutex::default(),
        }
    }
}

impl Backend for Native {
    fn kind(&self) -> BackendKind {
        BackendKind::Native
    }

    fn unsupported(&self, _spec: &SandboxSpec) -> Vec<String> {
        Vec::new()
    }

    fn render(&self, _spec: &SandboxSpec) -> Result<Vec<Vec<String>>, String> {
        Ok(Vec::new())
    }

    fn launch(&self, spec: &SandboxSpec, gates: &mut dyn Gates) -> Result<Outcome, LaunchError> {
        let prestart = self
            .prestart
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let lease = self.lease.lock().unwrap_or_else(|e| e.into_inner()).take();
        crate::native::run_prestarted(spec, gates, prestart, lease)
    }

    fn hold_lease(&self, lease: OverlayLease) -> Option<OverlayLease> {
        *self.lease.lock().unwrap_or_else(|e| e.into_inner()) = Some(lease);
        None
    }
}

/// The backend a launch uses: `--backend`, else `[sandbox] backend`, else `$AIRLOCK_BACKEND`,
/// else native. A value of the variable that names no backend is an error.
pub fn choose(
    flag: Option<BackendKind>,
    config: Option<BackendKind>,
    env: Option<&std::ffi::OsStr>,
) -> Result<BackendKind, String> {
    if let Some(kind) = flag.or(config) {
        return Ok(kind);
    }
    match env {
        None => Ok(BackendKind::Native),
        Some(value) if value.is_empty() => Ok(BackendKind::Native),
        Some(value) => value.to_str().and_then(BackendKind::parse).ok_or_else(|| {
            format!(
                "AIRLOCK_BACKEND={:?} names no backend; use one of: {}",
                value.to_string_lossy(),
                BackendKind::ALL.map(BackendKind::as_str).join(", ")
            )
        }),
    }
}

/// The backend of `kind`, with the host programs it runs already resolved (`bwrap`: the
/// bubblewrap binary from a trusted PATH entry; `None` when it was not found; `container`: the
/// engine from [`container::resolve`], or why it cannot be used; `sbx`: the Docker Sandboxes
/// backend, which lives with the sbx driver in `airlock-herdr`, or why it cannot be used).
pub fn select(
    kind: BackendKind,
    bwrap: Option<PathBuf>,
    container: Option<Result<container::Container, String>>,
    sbx: Option<Result<Box<dyn Backend>, String>>,
) -> Result<Box<dyn Backend>, String> {
    match kind {
        BackendKind::Sbx => sbx.unwrap_or_else(|| {
            Err(
                "the sbx backend needs the sbx CLI (Docker Sandboxes); or use --backend native"
                    .into(),
            )
        }),
        BackendKind::Native => Ok(Box::new(Native::default())),
        BackendKind::Container => match container {
            Some(Ok(c)) => Ok(Box::new(c)),
            Some(Err(e)) => Err(e),
            None => {
                Err("the container backend needs podman or docker; or use --backend native".into())
            }
        },
        BackendKind::Bwrap => match bwrap {
            Some(program) => Ok(Box::new(bwrap::Bwrap::new(program)?)),
            None => Err(
                "the bwrap backend needs bubblewrap, which is not on PATH (as root: apt-get \
                 install bubblewrap); or use --backend native"
                    .into(),
            ),
        },
    }
}

/// `airlock doctor`'s rows: the backend a launch here would use and why, then whether each
/// backend can run on this machine (`bwrap`: the resolved bubblewrap, if any; `sbx`: the row
/// the sbx backend's owner made).
pub fn doctor_rows(
    selected: Result<BackendKind, String>,
    why: &str,
    bwrap: Option<&std::path::Path>,
    container: Result<&container::Container, String>,
    sbx: crate::doctor::Check,
) -> Vec<crate::doctor::Check> {
    use crate::doctor::{Check, Status};
    let mut rows = vec![match selected {
        Ok(kind) => Check {
            name: "backend",
            status: Status::Ok,
            detail: format!("{} ({why})", kind.as_str()),
            fix: None,
        },
        Err(e) => Check {
            name: "backend",
            status: Status::Fail,
            detail: e,
            fix: Some("set AIRLOCK_BACKEND to native, bwrap, container or sbx, or unset it".into()),
        },
    }];
    rows.push(Check {
        name: "backend native",
        status: Status::Ok,
        detail: "built in: airlock's own namespaces, root, Landlock and seccomp (the rows below \
                 say what this kernel gives it)"
            .into(),
        fix: None,
    });
    rows.push(match bwrap {
        Some(program) => match bwrap::Bwrap::version(program) {
            Some(version) => Check {
                name: "backend bwrap",
                status: Status::Ok,
                detail: format!("{} ({version})", program.display()),
                fix: None,
            },
            None => Check {
                name: "backend bwrap",
                status: Status::Warn,
                detail: format!("{} does not answer --version", program.display()),
                fix: Some("reinstall bubblewrap (apt-get install --reinstall bubblewrap)".into()),
            },
        },
        None => Check {
            name: "backend bwrap",
            status: Status::Warn,
            detail: "bubblewrap is not on PATH (outside the project and home)".into(),
            fix: Some("as root: apt-get install bubblewrap (only for --backend bwrap)".into()),
        },
    });
    rows.push(container::doctor_row(container));
    rows.push(sbx);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn the_flag_wins_then_the_config_then_the_variable() {
        let (n, b) = (BackendKind::Native, BackendKind::Bwrap);
        let bw = Some(OsStr::new("bwrap"));
        assert_eq!(choose(Some(n), Some(b), bw), Ok(n));
        assert_eq!(choose(None, Some(n), bw), Ok(n));
        assert_eq!(choose(None, None, bw), Ok(b));
        assert_eq!(choose(None, None, None), Ok(n));
        assert_eq!(choose(None, None, Some(OsStr::new(""))), Ok(n));
    }

    #[test]
    fn a_variable_naming_no_backend_is_refused_with_the_choices() {
        let e = choose(None, None, Some(OsStr::new("docker"))).unwrap_err();
        assert!(e.contains("AIRLOCK_BACKEND=\"docker\""), "{e}");
        assert!(e.contains("native, bwrap, container, sbx"), "{e}");
        // The flag still wins over a bad variable.
        assert!(choose(Some(BackendKind::Native), None, Some(OsStr::new("x"))).is_ok());
    }

    #[test]
    fn bwrap_without_bubblewrap_says_how_to_get_it() {
        let e = select(BackendKind::Bwrap, None, None, None).err().unwrap();
        assert!(e.contains("apt-get install bubblewrap"), "{e}");
        assert!(e.contains("--backend native"), "{e}");
    }
}
