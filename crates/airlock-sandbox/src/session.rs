//! One launch of a planned spec, start to end, whatever the backend: the project's state session
//! (its lock and record), the overlay lease, the spec's host-side prepare steps, the gates
//! prepared and torn down around the launch, and the state closed (removed with `--rm`, or when a
//! first launch failed). The gates themselves (the egress proxy, the socket filters, the git
//! layer, the bridge grant) belong to the crates that own them; they meet here through
//! [`SessionGates`].

use std::path::Path;

use crate::backend::{Backend, Gates, LaunchError, Outcome};
use crate::spec::SandboxSpec;
use crate::state::{self, CloseOutcome, StateError};

/// The gates of one launch: [`Gates`] while it runs, plus what comes before and after.
pub trait SessionGates: Gates {
    /// Called once the session holds the project's state and its prepare steps ran, before the
    /// launch: start what the gates need (sockets, the session CA, the git layer, the bridge
    /// token), adjusting the spec. An error refuses the launch; [`SessionGates::finish`] still runs.
    fn prepare(&mut self, spec: &mut SandboxSpec, state_dir: &Path) -> Result<(), String>;

    /// After the launch, or after a refused prepare: stop and undo, in reverse. Returns the lines
    /// to tell the developer (what the git layer brought back, ...).
    fn finish(&mut self) -> Vec<String>;
}

/// Why a session did not get as far as the workload's outcome.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error("{0}")]
    Gates(String),
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

/// Where the session's state lives.
pub struct Dirs<'a> {
    pub sandboxes: &'a Path,
    pub locks: &'a Path,
}

/// Runs `spec` with `backend` and `gates` as one session of its project; `rm` (`--rm`) removes
/// the state at the end unless another session uses it.
///
/// Must be called while the process is single-threaded (the native backend clones after it).
pub fn run(
    dirs: &Dirs<'_>,
    mut spec: SandboxSpec,
    backend: &dyn Backend,
    gates: &mut dyn SessionGates,
    rm: bool,
) -> Result<Outcome, SessionError> {
    let session = state::open_session(dirs.sandboxes, dirs.locks, &spec.project)?;
    let created_now = session.created_now;
    let dir = session.dir.clone();
    let lease = match lease_and_prepare(&mut spec) {
        Ok(lease) => lease,
        Err(e) => {
            let _ = session.close(created_now);
            return Err(e.into());
        }
    };
    // A backend that can let the lease go once the overlays are unmounted, past this process's
    // exit, takes it; the session's end then does not wait for the unmount (`--rm` does: the
    // state goes once nothing is mounted from it).
    let lease = match lease {
        Some(lease) if !rm => backend.hold_lease(lease),
        lease => lease,
    };
    let launched = match gates.prepare(&mut spec, &dir) {
        Ok(()) => backend.launch(&spec, gates).map_err(SessionError::from),
        Err(e) => Err(SessionError::Gates(e)),
    };
    for message in gates.finish() {
        eprintln!("airlock: {message}");
    }
    let remove = rm || (created_now && launched.is_err());
    if lease.is_some() || remove {
        // The overlay layers are free, and the state can go, once init's mounts are gone and
        // nothing writes its logs any more.
        end_the_rest();
    }
    drop(lease);
    match session.close(remove) {
        Ok(CloseOutcome::KeptInUse) if rm => {
            eprintln!(
                "airlock: kept {}: another session is using it",
                dir.display()
            )
        }
        Ok(_) => {}
        Err(e) => eprintln!("airlock: warning: {e}"),
    }
    // What was told to stop at the sandbox's end, stopping all this time.
    end_the_rest();
    launched
}

/// What a session's end waits for last ([`end_later`]), in the order it was handed over.
static LATER: std::sync::Mutex<Vec<Box<dyn FnOnce() + Send>>> = std::sync::Mutex::new(Vec::new());

/// Hands `join` to the end of the session: a thread told to stop when the sandbox ended (the
/// egress proxy's, the port service's) wakes on another CPU, ~0.3–0.8 ms later on an idle VM, and
/// a native sandbox's init is still exiting (the kernel tearing down its namespaces, ~1 ms);
/// [`run`] waits for them only once its own end (the git layer, the state) is done. A launch that
/// does not go through [`run`] calls [`end_the_rest`] itself.
pub fn end_later(join: impl FnOnce() + Send + 'static) {
    LATER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Box::new(join));
}

/// What this process holds until it exits ([`let_go_at_exit`]).
static AT_EXIT: std::sync::Mutex<Vec<Box<dyn Send>>> = std::sync::Mutex::new(Vec::new());

/// Keeps `held` until this process exits, never dropping it: for a detached closer
/// (`native::sys::DetachedCloser`), whose pipe the kernel then closes as part of this process's
/// exit. The closer then does what it holds the last reference to (the sandbox's mount tree, the
/// keeper's watches) after this process has ended; and since it shares this process's memory,
/// this process's exit does not tear its address space down either (~0.2 ms here): the closer's
/// exit does. airlock runs one session per process, so nothing piles up here.
pub fn let_go_at_exit(held: impl Send + 'static) {
    AT_EXIT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Box::new(held));
}

/// Runs what [`end_later`] was given.
pub fn end_the_rest() {
    let later = std::mem::take(&mut *LATER.lock().unwrap_or_else(|e| e.into_inner()));
    for join in later {
        join();
    }
}

/// Takes the overlay lease (or demotes this session's overlays to throwaway ones) and performs the
/// spec's host-side prepare steps.
fn lease_and_prepare(spec: &mut SandboxSpec) -> Result<Option<state::OverlayLease>, StateError> {
    let lease = if spec.has_persistent_uppers() {
        match state::lease_overlays(&spec.state_root)? {
            state::Lease::Taken(lease) => Some(lease),
            state::Lease::InUse => {
                demote(
                    spec,
                    "another session of this project owns its overlay layers",
                );
                None
            }
            state::Lease::Unmounting => {
                demote(
                    spec,
                    &format!(
                        "the last session of this project was still unmounting its overlay \
                         layers after {} s",
                        state::LEASE_WAIT.as_secs()
                    ),
                );
                None
            }
        }
    } else {
        None
    };
    state::prepare(&spec.prepare)?;
    Ok(lease)
}

/// Makes this session's persistent overlays throwaway ones over the saved layers, and says so.
fn demote(spec: &mut SandboxSpec, owner: &str) {
    let n = spec.demote_persistent_uppers();
    let dirs = if n == 1 { "directory" } else { "directories" };
    eprintln!(
        "airlock: {owner}: this session sees what that one has saved in the {n} overlay-mode \
         tool {dirs} (logins, settings, history), and its own writes there are discarded when it \
         ends"
    );
}
