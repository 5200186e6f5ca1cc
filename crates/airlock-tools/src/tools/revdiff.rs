//! revdiff: the diff reviewer agents open in a host terminal overlay. Its binary is found like
//! any other; when it is on PATH, the session gets the shared temp directory (`$TMPDIR`, the same
//! path on both sides) its launcher hands files through, and its launches are declared to the
//! kitty and herdr filters (`launch_overlay`, pinned to the host's resolved revdiff; see
//! `airlock_sockets::overlay`).

use crate::tool::Tool;

pub(crate) struct Revdiff;

impl Tool for Revdiff {
    fn name(&self) -> &'static str {
        "revdiff"
    }
    fn description(&self) -> &'static str {
        "revdiff (overlay launches through the kitty and herdr filters, the shared temp dir)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["revdiff"]
    }
    fn has_mount_mode(&self) -> bool {
        false
    }
}
