//! Host name lookups in a statically linked build.

/// Looks up host names in `/etc/hosts` and then DNS (`/etc/resolv.conf`) only, whatever the
/// host's `/etc/nsswitch.conf` names, when this binary is linked statically
/// (`scripts/cargo-static`); a dynamically linked build keeps nsswitch.conf as it is.
///
/// The `files` and `dns` services are built into a static glibc. Any other (`mdns4_minimal`,
/// `resolve`, `myhostname`, …) would be loaded with a second, shared libc of whatever version the
/// host has installed since: a mismatch is at best a service skipped, at worst a crash in the
/// process that runs the egress proxy. Call it first in `main`, before any thread starts or any
/// name is looked up.
pub fn hosts_from_files_and_dns() {
    #[cfg(all(target_os = "linux", target_env = "gnu", target_feature = "crt-static"))]
    {
        unsafe extern "C" {
            // glibc's <nss.h>: sets a database's service line as if nsswitch.conf had it.
            fn __nss_configure_lookup(
                db: *const std::ffi::c_char,
                services: *const std::ffi::c_char,
            ) -> std::ffi::c_int;
        }
        // SAFETY: two NUL-terminated constants; the caller is single-threaded and has looked up
        // nothing yet, so no lookup reads the table while it changes.
        unsafe { __nss_configure_lookup(c"hosts".as_ptr(), c"files dns".as_ptr()) };
    }
}
