//! The bwrap stage's overlays: bubblewrap 0.8 has none, so bwrap binds each overlay's lower at
//! its target and its layer dir at a staging path (`backend::bwrap::render::staging_dir`), and the
//! stage, which owns the sandbox's mounts, puts the overlay on the target before anything else
//! runs, then detaches the staging mounts so the workload never sees the layers themselves.
//! The same options as native's (`rootfs/layers.rs`): `userxattr` when the kernel has it,
//! `nosuid,nodev`, every layer named through `/proc/self/fd`, opened with no link followed.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::backend::bwrap::render::{stacked_dir, staging_dir};
use crate::native::rootfs::target::open_or_mkdir;
use crate::native::sys;
use crate::spec::{MountOp, SandboxSpec, Upper};

/// Mounts every overlay of `spec`, in order.
pub(super) fn mount_all(spec: &SandboxSpec) -> Result<(), String> {
    let overlays = spec.mounts.iter().filter_map(|op| match op {
        MountOp::Overlay { target, upper, .. } => Some((target, upper)),
        _ => None,
    });
    for (i, (target, upper)) in overlays.enumerate() {
        mount_one(i, target, upper).map_err(|e| {
            format!(
                "cannot mount the overlay on {} (bwrap stage): {e}",
                target.display()
            )
        })?;
    }
    Ok(())
}

fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let slash: OwnedFd = std::fs::File::open("/")?.into();
    sys::openat2(
        slash.as_fd(),
        &c,
        libc::O_PATH | libc::O_DIRECTORY,
        sys::RESOLVE_NO_SYMLINKS,
    )
}

fn via_fd(fd: &OwnedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("digits")
}

fn mount_one(i: usize, target: &Path, upper: &Upper) -> Result<(), String> {
    let staged = PathBuf::from(staging_dir(i));
    let what = |p: &Path| {
        let p = p.to_owned();
        move |e: io::Error| format!("{}: {e}", p.display())
    };
    let lower = open_dir(target).map_err(what(target))?;
    let mut detach = vec![staged.clone()];
    let mut middle = None;
    if matches!(upper, Upper::Throwaway | Upper::Stacked { .. }) {
        // Writes go to a tmpfs of their own, gone with the sandbox.
        let fs = sys::new_fs(
            c"tmpfs",
            &[(c"mode", c"0700")],
            sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        )
        .map_err(what(&staged))?;
        let point = open_dir(&staged).map_err(what(&staged))?;
        sys::move_mount(fs.as_fd(), point.as_fd()).map_err(what(&staged))?;
    }
    if let Upper::Stacked { .. } = upper {
        let stacked = PathBuf::from(stacked_dir(i));
        middle = Some(open_dir(&stacked).map_err(what(&stacked))?);
        detach.push(stacked);
    }
    let layers = open_dir(&staged).map_err(what(&staged))?;
    let layer = |name: &CStr| open_or_mkdir(layers.as_fd(), name).map_err(what(&staged));
    let (upper_fd, work_fd) = (layer(c"upper")?, layer(c"work")?);
    let mut lowerdir = via_fd(&lower).into_bytes();
    if let Some(middle) = &middle {
        // lowerdir lists the top layer first: the owner's saved upper above the host's dir.
        let mut both = via_fd(middle).into_bytes();
        both.push(b':');
        both.extend_from_slice(&lowerdir);
        lowerdir = both;
    }
    let lowerdir = CString::new(lowerdir).expect("no NUL");
    let (u, w) = (via_fd(&upper_fd), via_fd(&work_fd));
    let options = [
        (c"lowerdir", lowerdir.as_c_str()),
        (c"upperdir", u.as_c_str()),
        (c"workdir", w.as_c_str()),
    ];
    let mut with_userxattr = options.to_vec();
    with_userxattr.push((c"userxattr", c""));
    let attrs = sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
    let fs = sys::new_fs(c"overlay", &with_userxattr, attrs)
        .or_else(|_| sys::new_fs(c"overlay", &options, attrs))
        .map_err(what(target))?;
    sys::move_mount(fs.as_fd(), lower.as_fd()).map_err(what(target))?;
    drop((lower, middle, layers, upper_fd, work_fd));
    // The overlay holds its own references to its layers: the staging mounts can go, so the
    // workload reaches the layers only through the overlay.
    for path in detach {
        nix::mount::umount2(&path, nix::mount::MntFlags::MNT_DETACH)
            .map_err(|e| format!("cannot detach {}: {e}", path.display()))?;
    }
    Ok(())
}
