//! mise: the tool version manager. Its dirs are read-only by default, so the host's toolchains
//! resolve inside but cannot be changed; `mount_mode = "overlay"` lets the sandbox install tools.

use airlock_config::NetworkMode;
use airlock_sandbox::ToolMountMode;

use super::{Xdg, env_dir, home, xdg};
use crate::host::HostView;
use crate::tool::{Category, Extras, KeyKind, KeySpec, MountDecl, Shell, Tool, ToolContext};

pub(crate) struct Mise;

const KEYS: &[KeySpec] = &[KeySpec {
    name: "ignore_global_config",
    kind: KeyKind::Bool,
    default: "false",
    help: "ignore the host's global mise config.toml (settings.toml and project files still apply)",
}];

/// mise's directory variables, each with its XDG default.
fn dirs(host: &HostView) -> Vec<(MountDecl, Option<(String, String)>)> {
    let mut out = Vec::new();
    for (var, base, category) in [
        ("MISE_CONFIG_DIR", Xdg::Config, Category::Config),
        ("MISE_DATA_DIR", Xdg::Data, Category::Data),
        ("MISE_STATE_DIR", Xdg::State, Category::State),
    ] {
        let fallback = xdg(host, base, "mise", category);
        let (dir, env) = env_dir(host, var, fallback.source.clone());
        let decl = match env {
            Some(_) => MountDecl::same(dir, category),
            None => fallback,
        };
        out.push((decl.fixed(ToolMountMode::Readonly), env));
    }
    out
}

impl Tool for Mise {
    fn name(&self) -> &'static str {
        "mise"
    }
    fn description(&self) -> &'static str {
        "Tool version manager (node, python, go, etc.)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["mise"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        let mut mounts =
            vec![home(host, ".local/bin", Category::Data).fixed(ToolMountMode::Readonly)];
        mounts.extend(dirs(host).into_iter().map(|(m, _)| m));
        mounts
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        let mut extras = Extras::default();
        extras
            .env
            .extend(dirs(ctx.host).into_iter().filter_map(|(_, env)| env));
        // A host config with `@latest` specs makes every mise call look up versions; behind the
        // proxy some lookups never get an answer and would each wait 20 s. And `mise --version`
        // asks mise.jdx.dev for a newer release once a day, retrying for about 4 s when refused.
        if ctx.network != NetworkMode::Host {
            extras
                .env
                .push(("MISE_FETCH_REMOTE_VERSIONS_TIMEOUT".into(), "3s".into()));
            extras
                .env
                .push(("MISE_DISABLE_UPDATE_WARNING".into(), "1".into()));
        }
        if ctx.config.flag("ignore_global_config", false) {
            extras
                .env
                .push(("MISE_GLOBAL_CONFIG_FILE".into(), "/dev/null".into()));
        }
        extras
    }
    fn shell_init(&self, shell: Shell) -> Option<&'static str> {
        Some(match shell {
            Shell::Bash => {
                r#"if command -v mise &>/dev/null; then eval "$(mise activate bash)"; fi"#
            }
            Shell::Zsh => r#"if command -v mise &>/dev/null; then eval "$(mise activate zsh)"; fi"#,
            Shell::Fish => "if command -q mise; mise activate fish | source; end",
        })
    }
    fn keys(&self) -> &'static [KeySpec] {
        KEYS
    }
}
