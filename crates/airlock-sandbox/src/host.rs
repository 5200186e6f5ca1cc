//! Host facts: everything the spec builder needs to know about this machine, read once.
//!
//! This is the only I/O on the way to a [`SandboxSpec`](crate::SandboxSpec); the builder is pure, so
//! tests hand it a [`HostFacts`] value describing a fixture host.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What is at a host path (symlinks not followed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PathKind {
    Dir,
    File,
    /// A symlink: its text and the fully resolved path (None when it dangles).
    Symlink {
        link_to: PathBuf,
        resolved: Option<PathBuf>,
    },
    Missing,
    /// A socket, fifo or device.
    Other,
}

/// A custom mount's host path after `~` expansion, where it resolves to, and what is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountSource {
    pub path: PathBuf,
    /// The path with every symlink resolved; None when it does not exist.
    pub resolved: Option<PathBuf>,
    /// What the resolved path is (never a symlink).
    pub kind: PathKind,
}

/// The host as the spec builder sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    /// The host home (canonical); the synthetic home is mounted here.
    pub home: PathBuf,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub hostname: String,
    /// The host environment (only a few named variables are ever copied in).
    pub env: BTreeMap<String, String>,
    /// The working directory (canonical).
    pub cwd: PathBuf,
    /// The project root (canonical): `--project`, else the git toplevel of the cwd, else the cwd.
    pub project: PathBuf,
    /// Where per-project state roots live (`~/.local/share/airlock/sandboxes`).
    pub sandboxes_dir: PathBuf,
    /// System paths at the top of the root (`/usr`, `/bin`, `/lib64`, ...).
    pub system: BTreeMap<PathBuf, PathKind>,
    /// The `/etc` entries of [`ETC_ENTRIES`] and what they are.
    pub etc: BTreeMap<PathBuf, PathKind>,
    /// Where the previous session of this project kept masks (its index), relative to the project.
    #[serde(default)]
    pub hidden: Vec<crate::hide::HiddenPath>,
    /// The project's `.airlock.toml`, when it is a regular file.
    pub project_config: Option<PathBuf>,
    /// The host's CA bundle variables worth passing in ([`crate::trust`]).
    #[serde(default)]
    pub ca_trust: Vec<crate::trust::CaTrust>,
    /// Each custom mount path as written in the config, with its `~`-expanded form and what is there.
    pub mount_sources: BTreeMap<String, MountSource>,
    /// Each custom mount pattern as written in the config, with what it matched at launch.
    #[serde(default)]
    pub mount_patterns: BTreeMap<String, crate::mount_patterns::PatternMatches>,
    /// The host bridge as this launch sees it.
    #[serde(default)]
    pub bridge: BridgeFacts,
    /// Each `[sandbox.environment]` NAME with a `file` source: the host path and what it holds.
    #[serde(default)]
    pub environment_files: BTreeMap<String, airlock_config::FileValue>,
    /// The host's RAM in bytes (0 when unknown): the default tmpfs size is a share of it.
    #[serde(default)]
    pub ram_bytes: u64,
    /// Where supervisors keep their control sockets and session records (`<state dir>/run`).
    #[serde(default)]
    pub run_dir: Option<PathBuf>,
}

/// The host's RAM, from sysinfo(2); 0 when it cannot be read.
pub fn ram_bytes() -> u64 {
    // SAFETY: sysinfo fills the zeroed struct it is given.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a sysinfo struct.
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return 0;
    }
    info.totalram
        .saturating_mul(u64::from(info.mem_unit.max(1)))
}

/// The host bridge (`airlock bridge install`) as one launch sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeFacts {
    /// The bridge state dir (`~/.local/state/airlock/bridge`) when its token exists, whether the
    /// daemon runs under a supervisor, by hand, or not at all; None when never installed.
    pub state_dir: Option<PathBuf>,
    /// The airlock binary (canonical): bound read-only (`airlock` inside).
    pub exe: Option<PathBuf>,
    /// `airlock-shim` beside it, when installed (it is built and installed with airlock): the
    /// shims are symlinks to this small binary, which starts faster; else to `exe` itself.
    #[serde(default)]
    pub shim: Option<PathBuf>,
}

impl BridgeFacts {
    /// Reads whether the bridge is installed and where this airlock binary is.
    pub fn gather(paths: &airlock_config::XdgPaths) -> BridgeFacts {
        let dir = paths.state_dir().join("bridge");
        let exe = std::env::current_exe()
            .ok()
            .and_then(|exe| airlock_config::canonicalize(exe).ok());
        let shim = exe
            .as_ref()
            .and_then(|exe| exe.parent())
            .map(|dir| dir.join("airlock-shim"))
            .filter(|shim| {
                use std::os::unix::fs::PermissionsExt as _;
                fs::metadata(shim).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            });
        BridgeFacts {
            state_dir: (dir.join("token").is_file() && dir.join("run").is_dir()).then_some(dir),
            exe,
            shim,
        }
    }
}

/// Top-level system paths, bound read-only (or recreated as the symlinks they are on the host).
pub const SYSTEM_PATHS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/nix",
];

/// The `/etc` entries a typical developer tool needs, and nothing secret (no shadow, no ssh host keys,
/// no sudoers, no credentials).
///
/// TLS trust is listed file by file rather than as `/etc/ssl` and `/etc/pki`: those also hold private
/// keys (`/etc/ssl/private`, `/etc/pki/tls/private`, RHEL's entitlement and consumer keys), which a
/// sandbox running as root could read. What is left is what OpenSSL, GnuTLS, NSS and Java read for
/// trust: the certificate directories and bundles, and OpenSSL's config with the files it includes.
pub const ETC_ENTRIES: &[&str] = &[
    "/etc/alternatives",
    "/etc/bash.bashrc",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/crypto-policies",
    "/etc/default/locale",
    "/etc/environment",
    "/etc/gai.conf",
    "/etc/group",
    "/etc/host.conf",
    "/etc/hostname",
    "/etc/hosts",
    "/etc/inputrc",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/localtime",
    "/etc/magic",
    "/etc/mime.types",
    "/etc/nsswitch.conf",
    "/etc/os-release",
    "/etc/passwd",
    "/etc/pki/ca-trust",
    "/etc/pki/java/cacerts",
    "/etc/pki/tls/cert.pem",
    "/etc/pki/tls/certs",
    "/etc/pki/tls/ct_log_list.cnf",
    "/etc/pki/tls/fips_local.cnf",
    "/etc/pki/tls/openssl.cnf",
    "/etc/pki/tls/openssl.d",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/protocols",
    "/etc/resolv.conf",
    "/etc/services",
    "/etc/shells",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/ssl/certs",
    "/etc/ssl/ct_log_list.cnf",
    "/etc/ssl/openssl.cnf",
    "/etc/terminfo",
    "/etc/timezone",
    "/etc/xdg",
    "/etc/zsh",
];

/// Whether every sandbox sees `path` from the host without a mount of its own: the system
/// directories and the listed `/etc` entries.
pub fn is_system_path(path: &Path) -> bool {
    SYSTEM_PATHS.iter().any(|p| path.starts_with(p))
        || ETC_ENTRIES.iter().any(|e| path.starts_with(e))
}

/// What is at `path`, without following a final symlink.
pub fn path_kind(path: &Path) -> PathKind {
    match fs::symlink_metadata(path) {
        Err(_) => PathKind::Missing,
        Ok(meta) if meta.file_type().is_symlink() => PathKind::Symlink {
            link_to: fs::read_link(path).unwrap_or_default(),
            resolved: airlock_config::canonicalize(path).ok(),
        },
        Ok(meta) if meta.is_dir() => PathKind::Dir,
        Ok(meta) if meta.is_file() => PathKind::File,
        Ok(_) => PathKind::Other,
    }
}

/// The project root for `cwd`: the nearest ancestor holding `.git`, unless that is `/` or `home`
/// (a dotfiles repository in the home must not turn the whole home into the project).
pub fn project_root(cwd: &Path, home: &Path) -> PathBuf {
    for dir in cwd.ancestors() {
        if dir.join(".git").symlink_metadata().is_ok() {
            if dir == Path::new("/") || dir == home {
                break;
            }
            return dir.to_owned();
        }
    }
    cwd.to_owned()
}

/// The user name of `uid` from `/etc/passwd`, else `$USER`, else the number.
pub fn user_name(uid: u32, env: &BTreeMap<String, String>) -> String {
    let from_passwd = fs::read_to_string("/etc/passwd").ok().and_then(|text| {
        text.lines().find_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let id: u32 = fields.nth(1)?.parse().ok()?;
            (id == uid).then(|| name.to_owned())
        })
    });
    from_passwd
        .or_else(|| env.get("USER").cloned())
        .unwrap_or_else(|| uid.to_string())
}

impl HostFacts {
    /// Reads the facts for a launch in `project` (already located) with the resolved `profile`.
    pub fn gather(
        paths: &airlock_config::XdgPaths,
        cwd: &Path,
        project: &Path,
        profile: &airlock_config::Profile,
    ) -> HostFacts {
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        let home = airlock_config::canonicalize(&paths.home).unwrap_or_else(|_| paths.home.clone());
        let kinds = |paths: &[&str]| {
            paths
                .iter()
                .map(|p| (PathBuf::from(p), path_kind(Path::new(p))))
                .collect::<BTreeMap<_, _>>()
        };
        let mount_sources = profile
            .mounts
            .iter()
            .filter_map(|m| match &m.selector {
                airlock_config::MountSelector::Path(path) => Some(path),
                airlock_config::MountSelector::Pattern(_) => None,
            })
            .map(|written| {
                let path = paths.expand_tilde(written);
                let resolved = airlock_config::canonicalize(&path).ok();
                let kind = resolved.as_deref().map_or(PathKind::Missing, path_kind);
                (
                    written.clone(),
                    MountSource {
                        path,
                        resolved,
                        kind,
                    },
                )
            })
            .collect();
        let config = project.join(".airlock.toml");
        let ca_trust = crate::trust::gather(&env, |path| {
            path.starts_with(project) || is_system_path(path)
        });
        HostFacts {
            ca_trust,
            user: user_name(uid, &env),
            uid,
            gid,
            ram_bytes: ram_bytes(),
            hostname: nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_else(|| "airlock".into()),
            env,
            cwd: cwd.to_owned(),
            project: project.to_owned(),
            sandboxes_dir: paths.sandboxes_dir(),
            run_dir: Some(paths.run_dir()),
            system: kinds(SYSTEM_PATHS),
            etc: kinds(ETC_ENTRIES),
            hidden: crate::hide::read_index(
                &paths
                    .sandboxes_dir()
                    .join(crate::state::sandbox_name(project))
                    .join(crate::hide::INDEX),
            ),
            project_config: (path_kind(&config) == PathKind::File).then_some(config),
            mount_sources,
            mount_patterns: crate::mount_patterns::gather(paths, &home, project, profile),
            bridge: BridgeFacts::gather(paths),
            environment_files: airlock_config::read_environment_files(profile, paths, project),
            home,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etc_entries_never_cover_secrets() {
        let secrets = [
            "/etc/shadow",
            "/etc/gshadow",
            "/etc/sudoers",
            "/etc/sudoers.d/admins",
            "/etc/ssh/ssh_host_ed25519_key",
            "/etc/ssl/private/ssl-cert-snakeoil.key",
            "/etc/pki/tls/private/localhost.key",
            "/etc/pki/entitlement/1234-key.pem",
            "/etc/pki/consumer/key.pem",
            "/etc/pki/CA/private/cakey.pem",
        ];
        for entry in ETC_ENTRIES {
            for secret in secrets {
                assert!(
                    !Path::new(secret).starts_with(entry),
                    "{entry} would bind {secret} into every sandbox"
                );
            }
        }
    }
}
