//! tmux: plugins and XDG config mounted, and the active config replaced by a generated copy that
//! puts a red `[SANDBOX]` in front of the status line.

use std::path::PathBuf;

use airlock_sandbox::GeneratedFile;

use super::{Xdg, home, xdg};
use crate::host::HostView;
use crate::tool::{Category, Extras, MountDecl, Tool, ToolContext};

pub(crate) struct Tmux;

/// Appended to the config: `-F` expands `#{status-left}` once, to the user's own status-left.
pub(crate) const STATUS_SNIPPET: &str = "\n# Added by airlock: a red [SANDBOX] marker in the status line.\n\
set -gF status-left \"#[bg=red,fg=white,bold] [SANDBOX] #[default] #{status-left}\"\n\
set -g status-left-length 60\n";

/// The config tmux would load, as (host path, path inside): `~/.tmux.conf`, else the XDG one,
/// else `~/.tmux.conf` (not present).
fn active_config(host: &HostView) -> (PathBuf, PathBuf) {
    let classic = host.home_path(".tmux.conf");
    let xdg_conf = xdg(host, Xdg::Config, "tmux/tmux.conf", Category::Config);
    if classic.exists() || !xdg_conf.source.exists() {
        (classic.clone(), classic)
    } else {
        (xdg_conf.source, xdg_conf.target)
    }
}

impl Tool for Tmux {
    fn name(&self) -> &'static str {
        "tmux"
    }
    fn description(&self) -> &'static str {
        "Tmux terminal multiplexer with sandbox indicator"
    }
    fn version_args(&self) -> &'static [&'static str] {
        &["-V"]
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["tmux"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        vec![
            home(host, ".tmux", Category::Data),
            xdg(host, Xdg::Config, "tmux", Category::Config),
        ]
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        let (source, target) = active_config(ctx.host);
        let mut extras = Extras::default();
        let mut content = match std::fs::read_to_string(&source) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                extras.warnings.push(format!(
                    "tool tmux: cannot read {}: {e}; tmux inside starts with only the sandbox marker",
                    ctx.host.tilde(&source)
                ));
                String::new()
            }
        };
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(STATUS_SNIPPET);
        extras.files.push(GeneratedFile {
            tool: "tmux".into(),
            target,
            content,
        });
        extras
    }
}
