//! `airlock herdr ...`: the herdr plugin's entry points (what herdr-plugin.toml runs).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Subcommand, ValueEnum};

use airlock_herdr::bridge::BridgeMode;

#[derive(Debug, Subcommand)]
pub enum HerdrCommand {
    /// Run a plugin action; prints the HERDR_SANDBOX_RESULT line first
    Action {
        /// One of: doctor, install-keybindings, start-agent, reconnect, open-shell, fetch-changes,
        /// stop, info, list-sandboxes, prune-mappings, sandboxes, open-port, replace-sandbox,
        /// forget-mapping
        name: String,
    },
    /// The pane-side process: prepare the sandbox and attach the agent (or a shell)
    Bridge {
        #[arg(value_enum)]
        mode: BridgeArg,
        #[arg(long)]
        pane_id: String,
        #[arg(long)]
        state_dir: PathBuf,
        #[arg(long)]
        config_dir: PathBuf,
        #[arg(long)]
        launch_id: Option<String>,
        /// The sbx the typing action resolved (a pane shell may not find it on its own)
        #[arg(long)]
        sbx_bin: Option<PathBuf>,
    },
    /// The worktree.removed hook (reads HERDR_PLUGIN_EVENT_JSON)
    Event,
    /// A manifest pane: the deletion popup or the sandboxes overlay
    Pane {
        #[arg(value_enum)]
        entrypoint: PaneArg,
    },
    /// Invoke an action through herdr and wait for its result line (exit 0 when ok)
    RunAction {
        name: String,
        /// Seconds to wait (a deletion popup waits for your answer)
        #[arg(default_value_t = 60)]
        timeout: u64,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BridgeArg {
    Start,
    Connect,
    Shell,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PaneArg {
    ConfirmDeletion,
    Sandboxes,
}

pub fn run(command: HerdrCommand) -> anyhow::Result<i32> {
    Ok(match command {
        HerdrCommand::Action { name } => airlock_herdr::actions::run(&name),
        HerdrCommand::Bridge {
            mode,
            pane_id,
            state_dir,
            config_dir,
            launch_id,
            sbx_bin,
        } => {
            let mode = match mode {
                BridgeArg::Start => BridgeMode::Start,
                BridgeArg::Connect => BridgeMode::Connect,
                BridgeArg::Shell => BridgeMode::Shell,
            };
            airlock_herdr::bridge::run(
                mode,
                &pane_id,
                &state_dir,
                &config_dir,
                launch_id.as_deref(),
                sbx_bin.as_deref(),
            )
        }
        HerdrCommand::Event => airlock_herdr::event::run(),
        HerdrCommand::Pane { entrypoint } => {
            let app =
                airlock_herdr::app::App::from_env(None, None).map_err(|e| anyhow::anyhow!(e))?;
            match entrypoint {
                PaneArg::ConfirmDeletion => {
                    airlock_herdr::confirm::popup(&app, &mut std::io::stdin().lock())
                }
                PaneArg::Sandboxes => airlock_herdr::panes::overlay::run(&app),
            }
        }
        HerdrCommand::RunAction { name, timeout } => {
            airlock_herdr::run_action::run(&name, Duration::from_secs(timeout))
                .map_err(|e| anyhow::anyhow!(e))?
        }
    })
}
