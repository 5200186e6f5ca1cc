//! Socket families: inside, `socket()` and `socketpair()` create only AF_UNIX, AF_INET, AF_INET6
//! and AF_NETLINK sockets of three protocols; every other family is refused with EPERM.
//!
//! Most attempts pass a socket type with an unknown flag bit: the kernel answers that with EINVAL
//! before it looks at the family (nothing is created, no module is loaded, on the host either), so
//! EPERM can only come from the filter.

use std::collections::BTreeMap;
use std::path::Path;

use crate::check;
use crate::harness::{Failure, Mode, Net, Outcome, Probe, World, fail, skip};
use crate::probe::sockets::known_families;

/// What the filter lets through (docs/security.md lists the same).
const ALLOWED: &[&str] = &[
    "AF_UNIX",
    "AF_INET",
    "AF_INET6",
    "NETLINK_ROUTE",
    "NETLINK_SOCK_DIAG",
    "NETLINK_KOBJECT_UEVENT",
];

/// Real sockets tried inside besides the unknown-type ones: families that are built into common
/// kernels (so a broken sandbox would not load modules on the host) or reachable without privilege.
const REAL_DENIED: &[&str] = &[
    "AF_VSOCK",
    "AF_PACKET",
    "AF_ALG",
    "AF_XDP",
    "NETLINK_GENERIC",
    "NETLINK_AUDIT",
    "NETLINK_NETFILTER",
];

/// `socket-errnos <how> <names…>` inside (`net`) or on the host (`None`), as NAME → verdict.
fn errnos(
    w: &mut World,
    net: Option<Net>,
    how: &str,
    names: &[&str],
) -> Result<(BTreeMap<String, String>, Probe), Failure> {
    let mut action = vec!["socket-errnos", how];
    action.extend_from_slice(names);
    let p = match net {
        Some(net) => w.probe(net, &action)?,
        None => w.host_probe(&action)?,
    };
    let Ok(detail) = &p.result else {
        return Err(fail(format!(
            "the probe could not run its socket attempts:\n      {}",
            p.run.describe()
        )));
    };
    let verdicts = detail
        .split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, verdict)| (name.to_owned(), verdict.to_owned()))
        .collect();
    Ok((verdicts, p))
}

/// Checks that every name in `names` got `want` (or anything but `want` when `negate`).
fn expect_all(
    got: &(BTreeMap<String, String>, Probe),
    names: &[&str],
    want: &str,
    negate: bool,
    what: &str,
) -> Outcome {
    let (verdicts, p) = got;
    let wrong: Vec<String> = names
        .iter()
        .filter(|n| {
            let v = verdicts.get(**n).map(String::as_str);
            (v == Some(want)) == negate
        })
        .map(|n| format!("{n}={}", verdicts.get(*n).map_or("?", String::as_str)))
        .collect();
    check!(
        wrong.is_empty(),
        "{what}: {} expected {}{want}:\n      {}",
        wrong.join(" "),
        if negate { "anything but " } else { "" },
        p.run.describe()
    );
    Ok(())
}

/// AF_VSOCK is not namespaced: on a VM (Firecracker, cloud VMs, WSL2) it reaches the hypervisor's
/// services even with `--network none`.
pub fn vsock_denied(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    for how in ["real", "pair", "unknown-type"] {
        let inside = errnos(&mut w, Some(Net::None), how, &["AF_VSOCK"])?;
        expect_all(&inside, &["AF_VSOCK"], "EPERM", false, "inside")?;
    }
    // The host answers otherwise: a socket where the VM has a vsock transport (this is one when
    // /dev/vsock exists), EAFNOSUPPORT where it has none.
    let host = errnos(&mut w, None, "real", &["AF_VSOCK"])?;
    expect_all(&host, &["AF_VSOCK"], "EPERM", true, "host control")?;
    if Path::new("/dev/vsock").exists() {
        expect_all(
            &host,
            &["AF_VSOCK"],
            "ok",
            false,
            "host control on a VM with vsock",
        )?;
    }
    let controls = errnos(&mut w, Some(Net::None), "real", &["AF_UNIX", "AF_INET"])?;
    expect_all(&controls, &["AF_UNIX", "AF_INET"], "ok", false, "control")
}

pub fn socket_families_denied(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let all = known_families();
    let denied: Vec<&str> = all
        .iter()
        .copied()
        .filter(|f| !ALLOWED.contains(f))
        .collect();
    let inside = errnos(&mut w, Some(Net::None), "unknown-type", &all)?;
    expect_all(&inside, &denied, "EPERM", false, "inside")?;
    // Control: the allowed families pass the filter and reach the kernel, which refuses the flag.
    expect_all(&inside, ALLOWED, "EINVAL", false, "control inside")?;
    let host = errnos(&mut w, None, "unknown-type", &all)?;
    expect_all(&host, &all, "EINVAL", false, "host control")?;
    let real = errnos(&mut w, Some(Net::None), "real", REAL_DENIED)?;
    expect_all(&real, REAL_DENIED, "EPERM", false, "inside")?;
    let real = errnos(&mut w, Some(Net::None), "real", ALLOWED)?;
    expect_all(&real, ALLOWED, "ok", false, "control inside")?;
    // Real tools on netlink: `ip` (NETLINK_ROUTE) and `ss` (NETLINK_SOCK_DIAG).
    for (tool, args, want) in [
        ("ip", &["-o", "addr", "show", "lo"][..], "127.0.0.1"),
        ("ss", &["-l", "-t", "-n"][..], "State"),
    ] {
        if !["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
            .iter()
            .any(|d| Path::new(d).join(tool).exists())
        {
            return Err(skip(format!(
                "every socket check passed, but `{tool}` is not installed for its real-tool control \
                 (scripts/test installs iproute2)"
            )));
        }
        let mut run_args = vec!["run", "--network", "none", "--", tool];
        run_args.extend_from_slice(args);
        let run = w.airlock(&run_args)?;
        check!(
            run.code() == Some(0) && run.stdout.contains(want),
            "control: `{tool} {}` must work inside:\n      {}",
            args.join(" "),
            run.describe()
        );
    }
    Ok(())
}
