//! The root built ahead: a prestarted init builds the sandbox's root from the root its project's
//! last launch had, while airlock plans this one; the launch uses it only if it is the same root.
//!
//! The root's build (~3 ms here) is the largest step after the plan, and a project's root rarely
//! changes between launches. So each prestarted launch records the part of its plan the root's
//! build reads ([`root_bytes`]: the mount operations, the hostname, the tmpfs size) in the
//! project's state directory, which only airlock writes. The next launch's starter hands that
//! record to init, which builds the root from it before airlock has planned, and then reports the
//! record's SHA-256 and, for every bind, the device and inode of the source it bound (`B`).
//!
//! Airlock uses that root only if both hold ([`Report::confirms`]):
//! - the record is byte for byte the root this launch planned (its hash), and
//! - every bind's source is still the file airlock finds at that path now, after the plan and the
//!   session's prepare steps. A source replaced after init bound it (a generated file rewritten,
//!   a directory swapped for a link) would otherwise be seen in its old form.
//!
//! Anything else kills init and clones a fresh one, which builds the root from this launch's plan
//! as every launch did before. Nothing of the sandbox runs before airlock's `G`, so a root built
//! from a stale or tampered record is never used: it only cost init's time on the other CPU.
//!
//! The record carries whether the next launch should build ahead ([`Ahead`]): not after a root
//! that differed from the record (a config changed, or one whose socket directory is named per
//! session, which would differ every time) until a launch plans the recorded root again, and not
//! after one whose sources changed under it, until the root itself changes. Roots with file copies
//! or throwaway overlays are never built ahead (a copy would be of the file before the prepare
//! steps wrote it; a throwaway layer is made per session). A root's persistent overlays are
//! mounted only after `G`, once the launch holds their lease (an upper directory may be another
//! session's, and one overlay at a time may use it): init builds the rest ahead and waits to
//! pivot into it ([`Deferred`]), and such a root is recorded only when mounting its overlays last
//! gives the same tree.

use std::io::Read as _;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{rootfs, sys};
use crate::spec::{MountOp, SandboxSpec, Upper};

/// The record's file in the project's state directory: the [`Ahead`] mark, the network byte
/// ([`HOST_NETWORK`] or [`OWN_NETWORK`]: which namespaces the root's init was cloned with), then
/// the root ([`root_bytes`]).
pub const FILE: &str = "root-ahead";

/// The record's second byte for a sandbox on the host's network.
const HOST_NETWORK: u8 = b'h';
/// ... and for one with a network namespace of its own.
const OWN_NETWORK: u8 = b'n';

/// The mark and the network byte.
const HEAD: usize = 2;

/// The largest record a starter hands on: a root of thousands of mounts is still far below.
const RECORD_CAP: u64 = 1 << 20;

/// The message init sends after building ahead.
pub(super) const BUILT: u8 = b'B';

/// What the next launch does with the record, its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ahead {
    /// Build the root ahead.
    Build,
    /// Not: the last launch planned another root than the record's. Armed again when a launch
    /// plans the recorded root.
    Changed,
    /// Not: the last root built ahead bound files that had been replaced by the launch's check.
    /// Armed again only when the root changes.
    Moved,
}

impl Ahead {
    fn byte(self) -> u8 {
        match self {
            Ahead::Build => b'1',
            Ahead::Changed => b'0',
            Ahead::Moved => b'-',
        }
    }

    fn from_byte(byte: u8) -> Option<Ahead> {
        match byte {
            b'1' => Some(Ahead::Build),
            b'0' => Some(Ahead::Changed),
            b'-' => Some(Ahead::Moved),
            _ => None,
        }
    }
}

/// The part of a spec the root's build reads.
#[derive(Serialize)]
struct RootRef<'a> {
    mounts: &'a [MountOp],
    hostname: &'a str,
    tmpfs_bytes: u64,
}

/// [`RootRef`] as init reads it back.
#[derive(Deserialize)]
struct Root {
    mounts: Vec<MountOp>,
    hostname: String,
    tmpfs_bytes: u64,
}

/// The record's body for `spec`: the bytes two launches' roots are compared by. `None` when the
/// root must not be built ahead (see the module).
pub fn root_bytes(spec: &SandboxSpec) -> Option<Vec<u8>> {
    let ahead = spec.mounts.iter().enumerate().all(|(i, op)| match op {
        MountOp::Overlay {
            upper: Upper::Persistent { .. },
            target,
            ..
        } => spec.mounts[i + 1..].iter().all(|later| {
            !later.target().starts_with(target) && !target.starts_with(later.target())
        }),
        MountOp::Overlay { .. } | MountOp::CopyFile { .. } => false,
        _ => true,
    });
    ahead.then(|| {
        serde_json::to_vec(&RootRef {
            mounts: &spec.mounts,
            hostname: &spec.hostname,
            tmpfs_bytes: spec.limits.tmpfs_bytes,
        })
        .expect("mount operations serialise")
    })
}

/// Whether the record at `path` says to build its root ahead, and then whether that root's
/// sandbox is on the host's network (`Some(true)`): what an early starter clones init with,
/// before airlock has read the config that says.
pub fn builds_ahead_on_host_network(path: &Path) -> Option<bool> {
    let mut head = [0u8; HEAD];
    let mut file = std::fs::File::open(path).ok()?;
    std::io::Read::read_exact(&mut file, &mut head).ok()?;
    match head {
        [b'1', HOST_NETWORK] => Some(true),
        [b'1', OWN_NETWORK] => Some(false),
        _ => None,
    }
}

/// The record for the starter: open only when it says to build ahead. Called in the starter, so
/// it allocates nothing it would have to free.
pub(super) fn open_for_build(path: &std::ffi::CStr) -> Option<OwnedFd> {
    // SAFETY: a valid C string; the descriptor is owned below.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: freshly opened.
    let file: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
    let mut first = [0u8; 1];
    // SAFETY: reads one byte into a live buffer.
    let n = unsafe { libc::pread(file.as_raw_fd(), first.as_mut_ptr().cast(), 1, 0) };
    (n == 1 && first[0] == Ahead::Build.byte()).then_some(file)
}

/// Init's side: builds the root `record` holds and returns its report (the body of `B`: the
/// record's hash and the bound sources' ids), and the root's persistent overlays when it has
/// any, still to be mounted ([`Deferred`]); `None` when it could not (init then reports `B`
/// alone and exits). The launch then sends `G`, or kills init.
pub(super) fn build(record: OwnedFd) -> Option<(Vec<u8>, Option<Deferred>)> {
    let (root, hash) = read(record)?;
    let size = (root.tmpfs_bytes > 0)
        .then(|| std::ffi::CString::new(root.tmpfs_bytes.to_string()).expect("digits"));
    let (overlays, now): (Vec<MountOp>, Vec<MountOp>) = root
        .mounts
        .into_iter()
        .partition(|op| matches!(op, MountOp::Overlay { .. }));
    let (ids, deferred) = if overlays.is_empty() {
        let ids = rootfs::build(&now, &root.hostname, size.as_deref()).ok()?;
        (ids, None)
    } else {
        let building = rootfs::Building::start(size.as_deref()).ok()?;
        let ids = building.apply(&now).ok()?;
        let deferred = Deferred {
            building,
            overlays,
            hostname: root.hostname,
        };
        (ids, Some(deferred))
    };
    let mut report = Vec::with_capacity(hash.len() + ids.len() * 16);
    report.extend_from_slice(&hash);
    for (dev, ino) in ids {
        report.extend_from_slice(&dev.to_le_bytes());
        report.extend_from_slice(&ino.to_le_bytes());
    }
    Some((report, deferred))
}

/// A root built ahead but for its persistent overlays, and not yet pivoted into. An overlay's
/// upper directory is used by one mount at a time, and only the session holding the overlay
/// lease may mount it: the launch takes the lease before it plans, so init mounts these only
/// after `G` ([`Deferred::finish`]). [`root_bytes`] builds such a root ahead only when no mount
/// after an overlay is at, beneath or above its target, so mounting them last gives the same
/// tree.
pub(super) struct Deferred {
    building: rootfs::Building,
    overlays: Vec<MountOp>,
    hostname: String,
}

impl Deferred {
    /// Mounts the overlays and pivots into the root.
    pub(super) fn finish(self) -> Result<(), rootfs::SetupError> {
        self.building.apply(&self.overlays)?;
        self.building.finish(&self.hostname)
    }
}

/// The record's root and the SHA-256 of its body.
fn read(record: OwnedFd) -> Option<(Root, [u8; 32])> {
    let mut bytes = Vec::new();
    std::fs::File::from(record)
        .take(RECORD_CAP + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    let body = match bytes.split_at_checked(HEAD) {
        Some((head, body)) if head[0] == Ahead::Build.byte() && body.len() as u64 <= RECORD_CAP => {
            body
        }
        _ => return None,
    };
    let root = serde_json::from_slice(body).ok()?;
    Some((root, Sha256::digest(body).into()))
}

/// A file's device and inode: what a bind's source is checked by.
pub type FileId = (u64, u64);

/// Init's `B` report, as the launch received it.
pub(super) struct Report {
    /// `None`: init could not build the record's root.
    built: Option<Built>,
}

/// A root init built: its record's SHA-256 and each bind's source, in order.
struct Built {
    hash: [u8; 32],
    sources: Vec<FileId>,
}

/// Why a root built ahead is not used.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Init could not build it, or ended without a report.
    NotBuilt,
    /// The record's root is not this launch's.
    Changed,
    /// A bind's source is no longer the file init bound (named).
    Moved(PathBuf),
}

impl Report {
    /// Waits for init's report on `sock` (init may still be building); an init that ended
    /// without one reports nothing built. The buffer holds the ids of `sources` and one more,
    /// so a report of more binds than this launch planned is still seen to be one and refused
    /// (a larger message is cut to the buffer, a datagram at a time).
    pub(super) fn receive(sock: RawFd, sources: &Sources) -> Report {
        let mut buf = vec![0u8; 33 + 16 * (sources.0.len() + 1)];
        let got = sys::recv_with_fd(sock, &mut buf, nix::sys::socket::MsgFlags::empty());
        let built = match got {
            Ok((n, _)) if n >= 33 && buf[0] == BUILT && (n - 33) % 16 == 0 => {
                let hash: [u8; 32] = buf[1..33].try_into().expect("32 bytes");
                let ids = buf[33..n]
                    .chunks_exact(16)
                    .map(|c| {
                        let dev = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
                        let ino = u64::from_le_bytes(c[8..].try_into().expect("8 bytes"));
                        (dev, ino)
                    })
                    .collect();
                Some(Built { hash, sources: ids })
            }
            _ => None,
        };
        Report { built }
    }

    /// Whether the root init built is the one planned (`planned`, the spec's [`root_bytes`]) over
    /// the same files: the record's hash, then every bind's source as `sources` found it.
    pub fn confirms(&self, planned: Option<&[u8]>, sources: &Sources) -> Result<(), Refused> {
        let Some(built) = &self.built else {
            return Err(Refused::NotBuilt);
        };
        let planned = planned.ok_or(Refused::Changed)?;
        if Sha256::digest(planned).as_slice() != built.hash {
            return Err(Refused::Changed);
        }
        sources.bound_as(&built.sources)
    }
}

/// The bind sources of a spec, in order, each with the file it names when looked up (device and
/// inode, links followed as the bind follows them). Looked up while init builds the root ahead,
/// so its report is checked at once: a file init bound is accepted only if it is the one the
/// path named at this lookup, whichever of the two came first.
pub struct Sources(Vec<(PathBuf, Option<FileId>)>);

impl Sources {
    /// Each bind source of `spec`, looked up now.
    pub fn now(spec: &SandboxSpec) -> Sources {
        let binds = spec.mounts.iter().filter_map(|op| match op {
            MountOp::Bind { source, .. } => Some(source),
            _ => None,
        });
        Sources(
            binds
                .map(|source| {
                    let id = std::fs::metadata(source).map(|m| (m.dev(), m.ino())).ok();
                    (source.clone(), id)
                })
                .collect(),
        )
    }

    /// Whether each source is the file `ids` names (device and inode, as init found it).
    pub fn bound_as(&self, ids: &[FileId]) -> Result<(), Refused> {
        let mut ids = ids.iter();
        for (source, now) in &self.0 {
            if now.is_none() || now.as_ref() != ids.next() {
                return Err(Refused::Moved(source.clone()));
            }
        }
        match ids.next() {
            None => Ok(()),
            Some(_) => Err(Refused::Changed),
        }
    }
}

/// What a launch writes back to the record once its workload may run.
pub struct Record {
    path: PathBuf,
    /// This launch's root ([`root_bytes`]).
    planned: Option<Vec<u8>>,
    /// Whether this launch's sandbox is on the host's network.
    host_network: bool,
    /// How a build ahead went; `None` when there was none.
    outcome: Option<Result<(), Refused>>,
}

impl Record {
    pub(super) fn new(
        path: PathBuf,
        planned: Option<Vec<u8>>,
        host_network: bool,
        outcome: Option<Result<(), Refused>>,
    ) -> Record {
        Record {
            path,
            planned,
            host_network,
            outcome,
        }
    }

    /// Writes what the next launch should know, when it differs from the record (see
    /// [`next`]). Best effort: a record that cannot be written only costs the next launch time.
    pub fn save(self) {
        let network = match self.host_network {
            true => HOST_NETWORK,
            false => OWN_NETWORK,
        };
        let old = std::fs::read(&self.path).ok();
        let old = old.as_deref().and_then(|b| {
            let (head, body) = b.split_at_checked(HEAD)?;
            Some((Ahead::from_byte(head[0])?, head[1], body))
        });
        let same_network = old.is_some_and(|(_, byte, _)| byte == network);
        let old = old.map(|(mark, _, body)| (mark, body));
        let wanted = next(old, self.planned.as_deref(), self.outcome.as_ref());
        let Some(body) = self.planned.as_deref() else {
            let _ = std::fs::remove_file(&self.path);
            return;
        };
        let mark = match (wanted, old) {
            (Some(mark), _) => mark,
            (None, Some((mark, _))) if !same_network => mark,
            (None, _) => return,
        };
        let mut bytes = Vec::with_capacity(HEAD + body.len());
        bytes.extend_from_slice(&[mark.byte(), network]);
        bytes.extend_from_slice(body);
        let _ = crate::state::replace_file(&self.path, &bytes);
    }
}

/// What to record after a launch that planned `planned` (`None`: a root never built ahead),
/// with `old` in the record and `outcome` for its build ahead: the mark to write with `planned`,
/// or `None` to leave the record as it is (or remove it, when `planned` is `None`).
pub fn next(
    old: Option<(Ahead, &[u8])>,
    planned: Option<&[u8]>,
    outcome: Option<&Result<(), Refused>>,
) -> Option<Ahead> {
    let planned = planned?;
    let same = old.is_some_and(|(_, body)| body == planned);
    let wanted = match (outcome, old) {
        (Some(Ok(())), _) => Ahead::Build,
        (Some(Err(Refused::Moved(_))), _) => Ahead::Moved,
        (Some(Err(Refused::NotBuilt)), _) => Ahead::Changed,
        (Some(Err(Refused::Changed)), _) => Ahead::Changed,
        // Not built ahead: armed when this root repeats the record's, unless its files moved.
        (None, Some((Ahead::Moved, _))) if same => Ahead::Moved,
        (None, Some(_)) if same => Ahead::Build,
        (None, Some(_)) => Ahead::Changed,
        (None, None) => Ahead::Build,
    };
    let unchanged = old.is_some_and(|(mark, _)| mark == wanted) && same;
    (!unchanged).then_some(wanted)
}

/// The record's path for `project`'s state directory `state_root`.
pub fn path_in(state_root: &Path) -> PathBuf {
    state_root.join(FILE)
}

#[cfg(test)]
mod tests;
