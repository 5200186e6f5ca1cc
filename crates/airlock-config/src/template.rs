//! The documented starting config (`airlock config init`) and the resolved profile as TOML
//! (`airlock config show`).

use std::fmt::Write;

use crate::{EgressSettings, Profile};

/// Every key is commented out rather than set, so a later change of a default reaches users who
/// never changed the key. Lines `#key = value` (no space after `#`) are the defaults; the tests
/// uncomment them and check that they match [`Profile::default`].
const INIT_TEMPLATE: &str = r#"# airlock configuration.
#
# Global file: $XDG_CONFIG_HOME/airlock/config.toml (default ~/.config/airlock/config.toml).
# A project may have a .airlock.toml with the same keys. It is loaded only after you review it and
# run `airlock trust add <dir>`, and it is ignored again as soon as it changes, until re-trusted.
# Project values override global ones; env_passthrough, hide and mounts are added to the global ones.
#
# Every key below is commented out and shows its default. Unknown keys are an error.

[sandbox]
# How the sandbox reaches the network:
#   "proxy" a private network with only loopback, plus an egress proxy that applies [network]
#   "none"  a private network with only loopback
#   "host"  share the host's network, unfiltered (convenient, weakest)
#network = "proxy"

# Mask .env* files and .airlock.toml inside the project, so secrets and the config stay unseen.
#hide_env_files = true

# More files and directories to hide in the project, as globs: a name matches at any depth
# ("*.pem"), a path starts at the project root ("/config/master.key", "secrets/**").
#hide = []

# Host environment variables copied into the sandbox, by name, e.g. ["TERM", "LANG"].
#env_passthrough = []

# Variables set in the sandbox, one table per name, each with exactly one of:
#   value = "text"     the text itself, as written (no $VAR expansion; `config show` prints it)
#   env = "HOST_VAR"   the host's variable at launch (missing: a warning, and not set inside)
#   file = "path"      the file's contents at launch, one trailing newline removed: a regular file
#                      of at most 64 KiB; ~/ is your home, a relative path starts at this file's
#                      directory. `run --print-spec` shows env and file values as their source.
# They win over the tools' variables; names airlock sets itself (HOME, AIRLOCK*, ...) are refused,
# and so is a name also in env_passthrough. A project file's entry replaces the global one of the
# same name. None by default.
# [sandbox.environment.GITHUB_TOKEN]
# file = "~/.config/airlock/github-token"
# [sandbox.environment.NODE_ENV]
# value = "development"

# What launches the sandbox: "native" (airlock's own namespaces, Landlock and seccomp; nothing
# to install) or "bwrap" (bubblewrap builds the namespaces and the root from the same spec;
# airlock's init still applies Landlock, seccomp and the hidden files) or "container" (podman
# or docker, with [sandbox.container] below) or "sbx" (a Docker Sandboxes microVM per run; needs
# network "none" or "host" and no hidden files). `run --backend` wins; the default is
# $AIRLOCK_BACKEND, else "native". See docs/backends.md.
#backend = "native"

# Allow creating namespaces (and mounting in them) inside the sandbox, e.g. for nested
# containers or sandboxes. Widens what the agent can do; leave off unless a tool needs it.
#nested_namespaces = false

# Give the sandbox the host bridge (`airlock bridge install`, see docs/bridge.md): URL opens,
# code/codium, git credentials and sounds reach the host through a few checked routes.
#bridge = true

# Extra host paths, each mounted at the same path inside the sandbox. `~/` means your home.
# None by default. An entry gives path (one path, absolute or ~/...) or pattern (a glob expanded
# at launch: relative to the project, ~/... or absolute; * ? [...] and ** for any depth; a
# trailing / matches directories only; each match is mounted on its own). mode is one of:
#   "readonly"    visible, not writable
#   "readwrite"   visible and writable: changes reach the host
#   "hidden"      covered by an empty read-only directory (or empty file)
#   "tmpfs"       covered by an empty writable directory, discarded at exit
#   "overlay"     a directory visible; writes kept in the sandbox's state, never on the host
#   "tmpoverlay"  a directory visible; writes discarded at exit
# For one target, an exact path wins over a pattern's match, and a later pattern over an earlier
# one (global file first); a path inside another entry's directory is mounted on top of it.
# [[sandbox.mounts]]
# path = "~/src/shared-lib"
# mode = "readonly"

# [[sandbox.mounts]]
# pattern = "**/*.key"
# mode = "hidden"

# Limits for everything the sandbox runs (cgroup v2; a launch is refused, never run unlimited,
# when this machine cannot apply them). tmp_size bounds each of the sandbox's own tmpfs (/tmp,
# /var/tmp, /run, /dev/shm): a size or a share of RAM; default "12%".
# [sandbox.resources]
# memory = "4G"
# cpus = 2
# pids = 1024
# tmp_size = "12%"

# The container backend (backend = "container"): the engine (default: the one CONTAINER_HOST
# or DOCKER_HOST names, else podman when installed, else docker), a local image instead of
# airlock's own (never pulled), and whether containers are kept after they exit.
# [sandbox.container]
# engine = "podman"
# image = "localhost/my-image:1"
# keep = false

[network]
# Which hosts the egress proxy lets the sandbox reach (network = "proxy"); see docs/network.md.
# Every decision is logged; `airlock logs network` shows them.
#
# The base allowlist:
#   "balanced"   model provider APIs, the major package registries and code hosts
#   "allow-all"  every host (the address check below still applies)
#   "deny-all"   nothing but your allow rules
#preset = "balanced"

# Rules: "example.com", "*.example.com" (subdomains only, not example.com itself), or an IP
# address, each optionally with ":port". The project file adds to the global rules.
#allow = []
# Deny rules win over allow rules and over the preset.
#deny = []

# An allowed name that resolves to a loopback, private, link-local or this host's own address is
# refused unless a rule names that address (e.g. allow = ["10.0.0.5"]) or this is true.
# Cloud metadata addresses (169.254.169.254, ...) always need a rule naming them.
#allow_private = false

# Fixed addresses for names, used instead of DNS (like curl --resolve), e.g. for internal hosts:
# resolve = { "db.internal" = "10.0.0.5" }. The address must still pass the check above.
#resolve = {}

# Send allowed traffic through a company proxy: "http://[user:password@]host:port". By default the
# host's HTTPS_PROXY (or HTTP_PROXY) is used, with its NO_PROXY; "" connects directly. The policy
# above still decides, on the host the sandbox asked for.
# upstream_proxy = "http://proxy.corp:3128"   # default: the host's HTTPS_PROXY

# A request no rule matches: "deny" (403 at once) or "ask" (it waits up to ask_timeout seconds
# for your decision in `airlock network monitor`, run in another terminal; denied if nobody answers).
#unmatched = "deny"
#ask_timeout = 60
# While no monitor is connected, ask as a desktop notification too ("Allow once" / "Deny"),
# over your session bus.
#ask_notify = true

# Secrets the proxy adds on the way out, so the sandbox only holds a placeholder (global config
# only; docs/network.md). E.g. the agent's API key, read from the host's ANTHROPIC_API_KEY:
# [network.credentials.claude]
# preset = "anthropic"
# Port forwards between the host's loopback and the sandbox's (docs/network.md, "Ports and OAuth
# callbacks"). direction = "in": a server the sandbox runs on 127.0.0.1:<sandbox> is opened at the
# host's 127.0.0.1:<host> (any local user can connect to it, as to any dev server); "out": the
# sandbox reaches the host's 127.0.0.1:<host> at 127.0.0.1:<sandbox> inside, a door to that host
# service (warned about at every launch). The project file adds to the global entries.
# [[network.ports]]
# host = 3000
# sandbox = 3000
# direction = "in"

[overlay]
# How tool mounts (a tool's config, data and cache from your home) appear inside; see docs/tools.md:
#   "split"       each mount's default: config and runtime dirs "tmpoverlay", data, cache and
#                 state dirs "overlay" (mise, shell rc files and nvim: "readonly")
#   "overlay"     your files visible; the sandbox's writes kept in its state, never on the host
#   "tmpoverlay"  your files visible; the sandbox's writes discarded at exit
#   "readonly"    visible, not writable
#   "readwrite"   visible and writable: changes reach the host (warned at every run)
#   "disabled"    not mounted
#default = "split"

# Per-tool settings; `airlock tools info <name>` lists each tool's keys. Every tool has
# enabled (default true); tools that mount host paths have mount_mode (a mode above, overriding
# [overlay] default). An unknown tool or key is an error. Examples:
# [tools.git]
# mode = "readonly"              # "readonly" | "readwrite" | "disabled"
# allow_hooks = false            # let the sandbox write .git/hooks (hooks run on your host)
# trust_config_changes = false   # keep program-running .git/config keys the sandbox added
# [tools.mise]
# mount_mode = "overlay"
# ignore_global_config = false

# The bridge (global file only). Each sandbox gets a token of its own, scoped to its project,
# home and network policy; shared_token = true also accepts the install-time token, unscoped,
# from any caller (toolbox containers, Docker Sandboxes). credential_hosts: hosts /credential
# answers for besides those the project's git remotes name.
# [bridge]
# shared_token = false
# credential_hosts = ["git.example.com"]

# Host commands a sandbox may run through the bridge (global file only; `proximo` is built in).
# The first argument must be one of verbs; refused_flags are refused anywhere ("-o" also inside
# "-jo"); refused lists "verb argument" pairs. The bridge daemon reads this when it starts.
# [bridge.commands.mytool]
# program = "/usr/local/bin/mytool"   # default: the name on the daemon's PATH
# verbs = ["status", "logs"]
# refused_flags = ["-o", "--output"]
# refused = ["logs export"]
# timeout_secs = 120

# More config files for some projects (global file only). When the project's path matches the
# dir: glob (~/ is your home, * stays within one directory, ** spans any depth), path is loaded
# after this file and before the project's .airlock.toml, in the order listed. path is relative to
# this file's directory, ~/..., or absolute, and must exist when the glob matches. An included file
# may not include more, hold [bridge], or sit inside a project or the sandboxes' state.
# [[include]]
# if = "dir:~/work/**"
# path = "work.toml"
"#;

/// A commented `config.toml` documenting every key with its default; it parses to an empty config.
pub fn init_template() -> &'static str {
    INIT_TEMPLATE
}

/// The resolved profile as TOML, keys spelled as in the files; each mount notes the file it came from.
pub fn render_profile(p: &Profile) -> String {
    let mut out = String::from("[sandbox]\n");
    // Writing to a String cannot fail.
    if let Some(backend) = p.backend {
        let _ = writeln!(out, "backend = {}", quote(backend.as_str()));
    }
    let _ = writeln!(out, "network = {}", quote(p.network.as_str()));
    let _ = writeln!(out, "hide_env_files = {}", p.hide_env_files);
    let hidden: Vec<String> = p.hide.iter().map(|n| quote(n)).collect();
    let _ = writeln!(out, "hide = [{}]", hidden.join(", "));
    let names: Vec<String> = p.env_passthrough.iter().map(|n| quote(n)).collect();
    let _ = writeln!(out, "env_passthrough = [{}]", names.join(", "));
    let _ = writeln!(out, "nested_namespaces = {}", p.nested_namespaces);
    let _ = writeln!(out, "bridge = {}", p.bridge);
    for m in &p.mounts {
        // `{:?}` escapes newlines, so a hostile file name cannot end the comment.
        let _ = writeln!(out, "\n# from {:?}", m.origin);
        let _ = writeln!(out, "[[sandbox.mounts]]");
        let _ = writeln!(out, "{} = {}", m.selector.key(), quote(m.selector.value()));
        let _ = writeln!(out, "mode = {}", quote(m.mode.as_str()));
    }
    crate::environment::render(&mut out, &p.environment);
    render_resources(&mut out, &p.resources);
    render_container(&mut out, &p.container);
    render_network(&mut out, &p.egress);
    crate::credentials::render(&mut out, &p.credentials);
    render_ports(&mut out, &p.ports);
    render_tools(&mut out, p);
    out
}

/// `[sandbox.container]`, when anything is set.
fn render_container(out: &mut String, c: &crate::container::ContainerSettings) {
    if *c == crate::container::ContainerSettings::default() {
        return;
    }
    let _ = writeln!(out, "\n[sandbox.container]");
    if let Some(engine) = c.engine {
        let _ = writeln!(out, "engine = {}", quote(engine.as_str()));
    }
    if let Some(image) = &c.image {
        let _ = writeln!(out, "image = {}", quote(image));
    }
    let _ = writeln!(out, "keep = {}", c.keep);
}

/// `[sandbox.resources]`, when anything is set.
fn render_resources(out: &mut String, r: &crate::resources::Resources) {
    use crate::resources::TmpSize;
    if *r == crate::resources::Resources::default() {
        return;
    }
    let _ = writeln!(out, "\n[sandbox.resources]");
    if let Some(bytes) = r.memory {
        let _ = writeln!(out, "memory = {bytes}");
    }
    if let Some(milli) = r.cpus_milli {
        let _ = writeln!(out, "cpus = {}", f64::from(milli) / 1000.0);
    }
    if let Some(pids) = r.pids {
        let _ = writeln!(out, "pids = {pids}");
    }
    match r.tmp_size {
        Some(TmpSize::Bytes(bytes)) => {
            let _ = writeln!(out, "tmp_size = {bytes}");
        }
        Some(TmpSize::Percent(pct)) => {
            let _ = writeln!(out, "tmp_size = \"{pct}%\"");
        }
        None => {}
    }
}

/// The `[overlay]` and `[tools.<name>]` tables; each tool key notes the file it came from.
fn render_tools(out: &mut String, p: &Profile) {
    let _ = writeln!(out, "\n[overlay]");
    let _ = writeln!(out, "default = {}", quote(p.overlay_default.as_str()));
    for (tool, keys) in &p.tools {
        let _ = writeln!(out, "\n[tools.{}]", key(tool));
        for (name, setting) in keys {
            let _ = writeln!(
                out,
                "{} = {} # from {:?}",
                key(name),
                setting.value.to_toml(),
                setting.origin
            );
        }
    }
}

/// A TOML key: bare when it can be, else quoted.
pub(crate) fn key(s: &str) -> String {
    let bare = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { s.to_owned() } else { quote(s) }
}

/// The `[network]` table; each rule notes the file it came from.
fn render_network(out: &mut String, e: &EgressSettings) {
    let _ = writeln!(out, "\n[network]");
    let _ = writeln!(out, "preset = {}", quote(e.preset.as_str()));
    for (key, rules) in [("allow", &e.allow), ("deny", &e.deny)] {
        if rules.is_empty() {
            let _ = writeln!(out, "{key} = []");
            continue;
        }
        let _ = writeln!(out, "{key} = [");
        for r in rules {
            let _ = writeln!(out, "    {}, # from {:?}", quote(&r.rule), r.origin);
        }
        let _ = writeln!(out, "]");
    }
    let _ = writeln!(out, "allow_private = {}", e.allow_private);
    let entries: Vec<String> = e
        .resolve
        .iter()
        .map(|(name, ip)| format!("{} = {}", quote(name), quote(&ip.to_string())))
        .collect();
    if entries.is_empty() {
        let _ = writeln!(out, "resolve = {{}}");
    } else {
        let _ = writeln!(out, "resolve = {{ {} }}", entries.join(", "));
    }
    let _ = writeln!(out, "unmatched = {}", quote(e.unmatched.as_str()));
    let _ = writeln!(out, "ask_timeout = {}", e.ask_timeout);
    let _ = writeln!(out, "ask_notify = {}", e.ask_notify);
    if let Some(url) = &e.upstream_proxy {
        // Never the credentials: `config show` output ends up in terminals and bug reports.
        let _ = writeln!(
            out,
            "upstream_proxy = {}",
            quote(&crate::text::without_userinfo(url))
        );
    }
}

/// `[[network.ports]]`, each noting the file it came from.
fn render_ports(out: &mut String, ports: &[crate::ports::PortRule]) {
    for rule in ports {
        let _ = writeln!(out, "\n# from {:?}", rule.origin);
        let _ = writeln!(out, "[[network.ports]]");
        let _ = writeln!(out, "host = {}", rule.host);
        let _ = writeln!(out, "sandbox = {}", rule.sandbox);
        let _ = writeln!(out, "direction = {}", quote(rule.direction.as_str()));
    }
}

/// A TOML basic string with every needed escape.
pub(crate) fn quote(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests;
