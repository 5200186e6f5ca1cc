//! `airlock forward [--sandbox NAME|--session PID] HOST_PORT[:SANDBOX_PORT]`: an inbound forward
//! into a running session, asked of its supervisor over its control socket.

use std::time::Duration;

use airlock_config::XdgPaths;
use airlock_sandbox::ports::sessions::{self, Selector};
use airlock_sandbox::ports::{Request, ask};
use anyhow::{Context, bail};

#[derive(Debug, clap::Args)]
pub struct ForwardArgs {
    /// The session of this sandbox (a name from `airlock sessions`); default: the current
    /// project's
    #[arg(long, value_name = "NAME", conflicts_with = "session")]
    pub sandbox: Option<String>,
    /// The session whose supervisor has this pid (the PID column of `airlock sessions`)
    #[arg(long, value_name = "PID")]
    pub session: Option<u32>,
    /// The host's 127.0.0.1:HOST_PORT reaches 127.0.0.1:SANDBOX_PORT inside (default: the same)
    #[arg(value_name = "HOST_PORT[:SANDBOX_PORT]", value_parser = crate::cli::parse_port_mapping)]
    pub mapping: (u16, u16),
}

/// How long the supervisor may take to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

pub fn run(paths: &XdgPaths, args: &ForwardArgs) -> anyhow::Result<i32> {
    let here;
    let selector = match (&args.session, &args.sandbox) {
        (Some(pid), _) => Selector::Pid(*pid),
        (None, Some(name)) => Selector::Sandbox(name),
        (None, None) => {
            let (project, _) = super::run::project_here(paths)?;
            here = airlock_sandbox::state::sandbox_name(&project);
            Selector::Sandbox(&here)
        }
    };
    let session = sessions::find(&paths.run_dir(), selector).map_err(anyhow::Error::msg)?;
    let (host, sandbox) = args.mapping;
    match ask(
        &session.socket,
        &Request::Forward { host, sandbox },
        ANSWER_TIMEOUT,
    ) {
        Ok(text) => {
            println!(
                "{text} (sandbox {}, session {})",
                session.sandbox, session.pid
            );
            Ok(0)
        }
        Err(airlock_sandbox::ports::AskError::Refused(reason)) => bail!(
            "sandbox {} (session {}) refused the forward: {reason}",
            session.sandbox,
            session.pid
        ),
        Err(e) => Err(e).with_context(|| {
            format!(
                "cannot ask session {} of sandbox {}",
                session.pid, session.sandbox
            )
        }),
    }
}
