//! The engine's seccomp profile (the OCI/Docker JSON form), generated from the spec's policy:
//! the same denials as airlock's own filter, so the engine's layer refuses what native refuses.
//! airlock's filter is installed again by the exec wrapper, over this one.
//!
//! Everything not named is allowed (the default action): the wrapper must still apply
//! Landlock and its own filter, and the denials below are what airlock's policy is.

use serde_json::{Value, json};

use crate::native::seccomp::rules::{
    AF_NETLINK, ALLOWED_FAMILIES, ALLOWED_NETLINK, ALWAYS_DENIED, DENIED_IOCTLS, MOUNT_FAMILY,
};
use crate::native::seccomp::{NS_FLAGS_CLONE, NS_FLAGS_UNSHARE};
use crate::spec::SeccompPolicy;

/// The highest address family number denied one by one (AF_MAX is 46 on Linux 6.x; a family
/// above it does not exist and fails in the kernel anyway).
const FAMILY_MAX: u32 = 64;
/// Netlink protocols are numbered below 32 (MAX_LINKS).
const NETLINK_MAX: u32 = 32;
const LOW_32: u64 = 0xffff_ffff;

/// The profile as JSON text.
pub fn profile(policy: SeccompPolicy) -> String {
    serde_json::to_string_pretty(&profile_value(policy)).expect("a JSON value always serializes")
}

fn profile_value(policy: SeccompPolicy) -> Value {
    let mut names: Vec<&str> = ALWAYS_DENIED.iter().map(|(n, _)| *n).collect();
    if !policy.nested_namespaces {
        names.extend(MOUNT_FAMILY.iter().map(|(n, _)| *n));
    }
    let mut rules =
        vec![json!({"names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": libc::EPERM})];
    // clone3's flags are in memory where a filter cannot look: ENOSYS makes libc use clone.
    rules.push(json!({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": libc::ENOSYS}));
    for (_, request) in DENIED_IOCTLS {
        rules.push(deny(
            "ioctl",
            vec![masked_eq(1, LOW_32, u64::from(*request))],
        ));
    }
    if !policy.nested_namespaces {
        for (call, flags) in [("unshare", NS_FLAGS_UNSHARE), ("clone", NS_FLAGS_CLONE)] {
            for bit in (0..32).map(|b| 1u32 << b).filter(|b| flags & b != 0) {
                rules.push(deny(
                    call,
                    vec![masked_eq(0, u64::from(bit), u64::from(bit))],
                ));
            }
        }
    }
    let allowed: Vec<u32> = ALLOWED_FAMILIES.iter().map(|(_, f)| *f).collect();
    for family in (0..FAMILY_MAX).filter(|f| !allowed.contains(f) && *f != AF_NETLINK) {
        for call in ["socket", "socketpair"] {
            rules.push(deny(call, vec![masked_eq(0, LOW_32, u64::from(family))]));
        }
    }
    let netlink: Vec<u32> = ALLOWED_NETLINK.iter().map(|(_, p)| *p).collect();
    for protocol in (0..NETLINK_MAX).filter(|p| !netlink.contains(p)) {
        rules.push(deny(
            "socket",
            vec![
                masked_eq(0, LOW_32, u64::from(AF_NETLINK)),
                masked_eq(2, LOW_32, u64::from(protocol)),
            ],
        ));
    }
    json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": architectures(),
        "syscalls": rules,
    })
}

fn deny(call: &str, args: Vec<Value>) -> Value {
    json!({"names": [call], "action": "SCMP_ACT_ERRNO", "errnoRet": libc::EPERM, "args": args})
}

/// `(arg & mask) == value`, on the argument's 64 bits (the mask keeps the low 32 where a
/// caller's upper bits must not turn a request into another).
fn masked_eq(index: u32, mask: u64, value: u64) -> Value {
    json!({"index": index, "value": mask, "valueTwo": value, "op": "SCMP_CMP_MASKED_EQ"})
}

/// The one native ABI: a call of another (i386, x32, arm32) is refused by the engine's
/// bad-architecture action, as airlock's own filter kills it.
fn architectures() -> Vec<&'static str> {
    #[cfg(target_arch = "x86_64")]
    return vec!["SCMP_ARCH_X86_64"];
    #[cfg(target_arch = "aarch64")]
    return vec!["SCMP_ARCH_AARCH64"];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &Value) -> Vec<String> {
        v["syscalls"][0]["names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn the_profile_denies_what_airlocks_filter_denies() {
        let v = profile_value(SeccompPolicy {
            nested_namespaces: false,
        });
        assert_eq!(v["defaultAction"], "SCMP_ACT_ALLOW");
        let denied = names(&v);
        for call in [
            "bpf",
            "io_uring_setup",
            "keyctl",
            "mount",
            "setns",
            "open_tree",
            "pivot_root",
        ] {
            assert!(denied.iter().any(|n| n == call), "{call}");
        }
        let text = profile(SeccompPolicy {
            nested_namespaces: false,
        });
        let rules = v["syscalls"].as_array().unwrap();
        // TIOCSTI by its low 32 bits.
        assert!(rules.iter().any(|r| r["names"][0] == "ioctl"
            && r["args"][0]["valueTwo"] == u64::from(libc::TIOCSTI as u32)));
        // AF_VSOCK (40) and AF_PACKET (17) refused, AF_UNIX/INET/INET6 not.
        let family_denied = |f: u64| {
            rules.iter().any(|r| {
                r["names"][0] == "socket"
                    && r["args"].as_array().is_some_and(|a| a.len() == 1)
                    && r["args"][0]["valueTwo"] == f
            })
        };
        assert!(family_denied(40) && family_denied(17));
        assert!(!family_denied(1) && !family_denied(2) && !family_denied(10));
        // unshare(CLONE_NEWUSER) refused.
        assert!(rules.iter().any(|r| r["names"][0] == "unshare"
            && r["args"][0]["valueTwo"] == libc::CLONE_NEWUSER as u64));
        assert!(text.contains("SCMP_ARCH_"));
    }

    #[test]
    fn nested_namespaces_allow_the_mount_family_and_namespace_flags() {
        let v = profile_value(SeccompPolicy {
            nested_namespaces: true,
        });
        assert!(!names(&v).iter().any(|n| n == "mount"));
        let rules = v["syscalls"].as_array().unwrap();
        assert!(!rules.iter().any(|r| r["names"][0] == "unshare"));
        // The fixed denials stay.
        assert!(names(&v).iter().any(|n| n == "bpf"));
    }
}
