//! Dropping every capability the workload holds in its user namespace: bounding, ambient, effective,
//! permitted and inheritable. With the bounding set empty, executing a program as uid 0 (or a setuid or
//! file-capability binary) cannot bring any capability back.

use std::io;

// Capability sets are 64 bits wide (two 32-bit words in _LINUX_CAPABILITY_VERSION_3); drops beyond the
// kernel's last capability fail with EINVAL, which `drop_all` ignores.
const FALLBACK_LAST_CAP: u32 = 63;

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapUserHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapUserData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The highest capability number this kernel knows, from `/proc/sys/kernel/cap_last_cap`.
///
/// Read it before forking: `drop_all` must not allocate. Falls back to 63 if `/proc` is unreadable.
pub fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(FALLBACK_LAST_CAP)
}

/// Drops every capability of the calling thread, for good. `last_cap` comes from [`last_cap`].
///
/// Does not allocate, so it is safe between fork and exec. The bounding set goes first because
/// dropping from it needs CAP_SETPCAP, which the final `capset` gives up.
pub fn drop_all(last_cap: u32) -> io::Result<()> {
    drop_bounding_set(last_cap)?;
    drop_the_rest()
}

/// Empties the calling thread's bounding set, which its children inherit: native's init does
/// this while it may wait for `R`, so the workload only has [`drop_the_rest`] to do (41
/// `prctl` calls, ~86 µs here, off the workload's start). Does not allocate.
pub fn drop_bounding_set(last_cap: u32) -> io::Result<()> {
    for cap in 0..=last_cap {
        if let Err(e) = prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0) {
            match e.raw_os_error() {
                Some(libc::EINVAL) => {}
                // Without CAP_SETPCAP a drop fails even for a capability already gone; that is fine.
                Some(libc::EPERM) if !in_bounding_set(cap) => {}
                _ => return Err(e),
            }
        }
    }
    Ok(())
}

/// Clears the ambient set, then the effective, permitted and inheritable sets (which gives up
/// CAP_SETPCAP, so the bounding set must go first). Does not allocate.
pub fn drop_the_rest() -> io::Result<()> {
    let ambient = prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
        0,
    );
    match ambient {
        // A kernel older than 4.3 has no ambient set to clear.
        Err(e) if e.raw_os_error() != Some(libc::EINVAL) => return Err(e),
        _ => {}
    }

    let mut header = CapUserHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapUserData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: a version-3 header and the two data words it requires, both alive for the call.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn in_bounding_set(cap: u32) -> bool {
    prctl(libc::PR_CAPBSET_READ, libc::c_ulong::from(cap), 0).is_ok_and(|present| present != 0)
}

fn prctl(option: libc::c_int, arg2: libc::c_ulong, arg3: libc::c_ulong) -> io::Result<libc::c_int> {
    // SAFETY: the options used here take integer arguments only.
    let rc = unsafe { libc::prctl(option, arg2, arg3, 0 as libc::c_ulong, 0 as libc::c_ulong) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

#[cfg(test)]
mod tests {
    use super::super::forked::assert_ok;
    use super::*;

    #[test]
    fn last_cap_is_plausible() {
        // CAP_AUDIT_READ (37) exists since Linux 3.16.
        let last = last_cap();
        assert!(
            (37..=FALLBACK_LAST_CAP).contains(&last),
            "cap_last_cap = {last}"
        );
    }

    #[test]
    fn every_set_is_empty_after_drop_all() {
        every_set_is_empty_after(|last| drop_all(last).map_err(|e| format!("drop_all: {e}")));
    }

    #[test]
    fn every_set_is_empty_after_the_bounding_set_then_the_rest() {
        every_set_is_empty_after(|last| {
            drop_bounding_set(last).map_err(|e| format!("drop_bounding_set: {e}"))?;
            drop_the_rest().map_err(|e| format!("drop_the_rest: {e}"))
        });
    }

    fn every_set_is_empty_after(drop: fn(u32) -> Result<(), String>) {
        let last = last_cap();
        if !nix::unistd::geteuid().is_root() {
            println!("skipped: needs root to start with capabilities to drop");
            return;
        }
        assert_ok(|| {
            drop(last)?;
            let status = std::fs::read_to_string("/proc/self/status")
                .map_err(|e| format!("read /proc/self/status: {e}"))?;
            let mut seen = 0;
            for line in status.lines() {
                let Some((key, value)) = line.split_once(':') else {
                    continue;
                };
                if ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"].contains(&key) {
                    seen += 1;
                    if u64::from_str_radix(value.trim(), 16) != Ok(0) {
                        return Err(format!("{key} is {} after the drop", value.trim()));
                    }
                }
            }
            if seen == 5 {
                Ok(())
            } else {
                Err(format!(
                    "found {seen} of 5 capability lines in /proc/self/status"
                ))
            }
        });
    }
}
