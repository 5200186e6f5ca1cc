//! The built-in tools, one file each, and the path helpers they share.

use std::path::PathBuf;

use crate::host::HostView;
use crate::tool::{Category, MountDecl, Tool};

mod aider;
mod bash;
mod bun;
mod claude;
mod codex;
mod copilot;
mod cursor;
mod deno;
mod docker;
mod fish;
mod gemini;
mod go;
pub(crate) mod herdr;
pub mod kitty;
mod mise;
mod node;
mod nvim;
mod oh_my_posh;
mod oh_my_zsh;
mod opencode;
mod pi;
mod portal;
mod powerlevel10k;
mod python;
mod revdiff;
mod rtk;
mod rust;
mod starship;
mod tmux;
mod uv;
mod zellij;
mod zsh;

/// Every built-in tool.
pub(crate) fn all() -> Vec<Box<dyn Tool>> {
    vec![
        Box::new(aider::Aider),
        Box::new(bash::Bash),
        Box::new(bun::Bun),
        Box::new(claude::Claude),
        Box::new(codex::Codex),
        Box::new(copilot::Copilot),
        Box::new(cursor::Cursor),
        Box::new(deno::Deno),
        Box::new(docker::Docker),
        Box::new(fish::Fish),
        Box::new(gemini::Gemini),
        Box::new(crate::git::Git),
        Box::new(go::Go),
        Box::new(herdr::Herdr),
        Box::new(kitty::Kitty),
        Box::new(mise::Mise),
        Box::new(node::Node),
        Box::new(nvim::Nvim),
        Box::new(oh_my_posh::OhMyPosh),
        Box::new(oh_my_zsh::OhMyZsh),
        Box::new(opencode::Opencode),
        Box::new(pi::Pi),
        Box::new(portal::Portal),
        Box::new(powerlevel10k::Powerlevel10k),
        Box::new(python::Python),
        Box::new(revdiff::Revdiff),
        Box::new(rtk::Rtk),
        Box::new(rust::Rust),
        Box::new(starship::Starship),
        Box::new(tmux::Tmux),
        Box::new(uv::Uv),
        Box::new(zellij::Zellij),
        Box::new(zsh::Zsh),
    ]
}

/// Which XDG base directory a path lives under.
#[derive(Clone, Copy)]
pub(crate) enum Xdg {
    Config,
    Data,
    State,
    Cache,
}

/// `<host's XDG dir>/<rel>`, mounted at `<home>/<default XDG dir>/<rel>`: inside the sandbox the XDG
/// variables point at their defaults under the home, so that is where the tool looks.
pub(crate) fn xdg(host: &HostView, base: Xdg, rel: &str, category: Category) -> MountDecl {
    let (host_base, inside) = match base {
        Xdg::Config => (host.xdg_config(), ".config"),
        Xdg::Data => (host.xdg_data(), ".local/share"),
        Xdg::State => (host.xdg_state(), ".local/state"),
        Xdg::Cache => (host.xdg_cache(), ".cache"),
    };
    MountDecl {
        source: host_base.join(rel),
        target: host.home.join(inside).join(rel),
        ..MountDecl::same(PathBuf::new(), category)
    }
}

/// `~/<rel>` at the same path inside.
pub(crate) fn home(host: &HostView, rel: &str, category: Category) -> MountDecl {
    MountDecl::same(host.home_path(rel), category)
}

/// Creates `<dir>/sessions` when `dir` is a directory without it; true when created.
pub(crate) fn ensure_sessions_dir(host: &HostView, dir: &std::path::Path) -> bool {
    host.state(dir) == crate::host::PathState::Dir
        && host.state(&dir.join("sessions")) == crate::host::PathState::Missing
        && host.create_dir(&dir.join("sessions")).is_ok()
}

/// A tool directory overridable by an environment variable (CODEX_HOME, CLAUDE_CONFIG_DIR, ...):
/// the variable's absolute value when set, else `fallback`. The variable is passed through, so the
/// tool resolves the same path inside.
pub(crate) fn env_dir(
    host: &HostView,
    var: &str,
    fallback: PathBuf,
) -> (PathBuf, Option<(String, String)>) {
    match host.path_var(var) {
        Some(dir) => {
            let value = dir.to_string_lossy().into_owned();
            (dir, Some((var.to_owned(), value)))
        }
        None => (fallback, None),
    }
}
