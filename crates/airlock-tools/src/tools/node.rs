//! Node.js / npm: global packages go to `~/.npm-global` in the sandbox home. `~/.npmrc` is not
//! mounted: it often holds registry tokens. The host's *global* npmrc (where a company sets its
//! registry and `cafile=`) is carried in without its credentials, at the global config path of
//! the sandbox's prefix, and the `cafile` it names is bound read-only when it is a CA bundle.

use std::path::{Path, PathBuf};

use airlock_sandbox::{GeneratedFile, ToolMount, ToolMountMode};

use crate::host::HostView;
use crate::tool::{Extras, Tool, ToolContext};

pub(crate) struct Node;

/// The largest npmrc read.
const NPMRC_CAP: u64 = 256 * 1024;

impl Tool for Node {
    fn name(&self) -> &'static str {
        "node"
    }
    fn description(&self) -> &'static str {
        "Node.js / npm with global packages in the sandbox home"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["node", "npm"]
    }
    fn has_mount_mode(&self) -> bool {
        false
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        let prefix = ctx.host.home.join(".npm-global");
        let mut extras = Extras {
            env: vec![(
                "NPM_CONFIG_PREFIX".into(),
                prefix.to_string_lossy().into_owned(),
            )],
            path_prepend: vec![prefix.join("bin")],
            ..Extras::default()
        };
        if let Some(text) = global_npmrc(ctx.host)
            .and_then(|path| airlock_config::hostfs::read_regular_following(&path, NPMRC_CAP).ok())
        {
            let (content, cafile) = without_credentials(&String::from_utf8_lossy(&text));
            // npm reads `<prefix>/etc/npmrc` as its global config.
            extras.files.push(GeneratedFile {
                tool: "node".into(),
                target: prefix.join("etc/npmrc"),
                content,
            });
            let needs_bind = |f: &PathBuf| {
                !f.starts_with(&ctx.host.home) && !airlock_sandbox::host::is_system_path(f)
            };
            if let Some(cafile) =
                cafile.filter(|f| needs_bind(f) && airlock_sandbox::trust::is_bundle_file(f))
            {
                extras.fixed_mounts.push(ToolMount {
                    tool: "node".into(),
                    source: airlock_config::canonicalize(&cafile)
                        .unwrap_or_else(|_| cafile.clone()),
                    target: cafile,
                    mode: ToolMountMode::Readonly,
                    is_dir: false,
                });
            }
        }
        extras
    }
}

/// The host npm's global config file, found without running npm: `NPM_CONFIG_GLOBALCONFIG` alone
/// when set, else
/// what npm's builtin `npmrc` names (`globalconfig=`, or `prefix=` + `etc/npmrc`), else
/// `<node's prefix>/etc/npmrc`, else `/etc/npmrc`; the first that is a file.
fn global_npmrc(host: &HostView) -> Option<PathBuf> {
    // Set, it is the only one npm reads.
    for var in ["NPM_CONFIG_GLOBALCONFIG", "npm_config_globalconfig"] {
        if let Some(path) = host.path_var(var) {
            return (!path.starts_with(&host.home) && path.is_file()).then_some(path);
        }
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    let npm_dir = host
        .find_binary("npm")
        .and_then(|npm| airlock_config::canonicalize(npm).ok())
        .and_then(|cli| cli.parent()?.parent().map(Path::to_path_buf));
    if let Some(builtin) = npm_dir
        .map(|dir| dir.join("npmrc"))
        .and_then(|p| airlock_config::hostfs::read_regular_following(&p, NPMRC_CAP).ok())
    {
        let text = String::from_utf8_lossy(&builtin);
        for (key, value) in settings(&text) {
            match key {
                "globalconfig" => candidates.push(PathBuf::from(value)),
                "prefix" => candidates.push(Path::new(value).join("etc/npmrc")),
                _ => {}
            }
        }
    }
    if let Some(prefix) = host
        .find_binary("node")
        .and_then(|node| airlock_config::canonicalize(node).ok())
        .and_then(|node| node.parent()?.parent().map(Path::to_path_buf))
    {
        candidates.push(prefix.join("etc/npmrc"));
    }
    candidates.push(PathBuf::from("/etc/npmrc"));
    candidates
        .into_iter()
        .find(|p| p.is_absolute() && !p.starts_with(&host.home) && p.is_file())
}

/// `key = value` lines of an npmrc (comments and blank lines skipped).
fn settings(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines().filter_map(|line| {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            return None;
        }
        let (key, value) = line.split_once('=')?;
        Some((key.trim(), value.trim()))
    })
}

/// The npmrc without credentials (auth tokens, passwords, user names, client certificates and
/// keys), and the `cafile` it names.
fn without_credentials(text: &str) -> (String, Option<PathBuf>) {
    const SECRET: &[&str] = &[
        "_auth", "token", "password", "username", "email", "certfile", "keyfile", "cert", "key",
    ];
    let mut out = String::from("# The host's global npmrc, without credentials (airlock).\n");
    let mut cafile = None;
    for line in text.lines() {
        let key = line
            .split_once('=')
            .map(|(k, _)| k.trim().to_ascii_lowercase());
        if let Some(key) = &key {
            let name = key.rsplit(':').next().unwrap_or(key);
            if SECRET.iter().any(|s| name.contains(s)) {
                continue;
            }
            if name == "cafile" {
                cafile = line.split_once('=').map(|(_, v)| PathBuf::from(v.trim()));
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    (out, cafile.filter(|p| p.is_absolute()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_dropped_and_the_cafile_kept() {
        let (clean, cafile) = without_credentials(
            "registry=https://npm.corp.example/\n\
             //npm.corp.example/:_authToken=SECRET1\n\
             _auth = SECRET2\n\
             //npm.corp.example/:_password=SECRET3\n\
             cafile=/etc/corp/ca.pem\n\
             strict-ssl=true\n\
             certfile=/home/u/client.pem\n",
        );
        assert!(!clean.contains("SECRET"), "{clean}");
        assert!(!clean.contains("client.pem"), "{clean}");
        assert!(clean.contains("registry=https://npm.corp.example/"));
        assert!(clean.contains("strict-ssl=true"));
        assert!(clean.contains("cafile=/etc/corp/ca.pem"));
        assert_eq!(cafile, Some(PathBuf::from("/etc/corp/ca.pem")));
    }
}
