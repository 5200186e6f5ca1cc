//! `airlock forward [--sandbox NAME|--session PID] HOST_PORT[:SANDBOX_PORT]`: an inbound forward
//! into a running session, asked of its supervisor over its control socket; `--remove HOST_PORT`
//! closes one, `--list` prints what the session forwards.

use std::time::Duration;

use airlock_config::XdgPaths;
use airlock_sandbox::ports::sessions::{self, Selector, SessionRecord};
use airlock_sandbox::ports::{AskError, ForwardInfo, Request, ask};
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
    /// Close the inbound forward on the host's 127.0.0.1:HOST_PORT (connections already open
    /// go on until they close)
    #[arg(long, value_name = "HOST_PORT", value_parser = parse_port,
          conflicts_with_all = ["mapping", "list"])]
    pub remove: Option<u16>,
    /// Print the session's forwards, one a line (`8080→3000 (forward)`; `←` for outbound)
    #[arg(long, conflicts_with = "mapping")]
    pub list: bool,
    /// The host's 127.0.0.1:HOST_PORT reaches 127.0.0.1:SANDBOX_PORT inside (default: the same)
    #[arg(value_name = "HOST_PORT[:SANDBOX_PORT]", value_parser = crate::cli::parse_port_mapping,
          required_unless_present_any = ["remove", "list"])]
    pub mapping: Option<(u16, u16)>,
}

/// How long the supervisor may take to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

fn parse_port(text: &str) -> Result<u16, String> {
    match text.contains(':') {
        true => Err(format!(
            "{text:?} is not a port: --remove takes the host port alone (e.g. 8080)"
        )),
        false => crate::cli::parse_port_mapping(text).map(|(host, _)| host),
    }
}

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
    let (request, what) = match (args.remove, args.mapping) {
        _ if args.list => (Request::Ports, "the list"),
        (Some(host), _) => (Request::Remove { host }, "the removal"),
        (None, Some((host, sandbox))) => (Request::Forward { host, sandbox }, "the forward"),
        (None, None) => bail!("give HOST_PORT[:SANDBOX_PORT], --remove HOST_PORT or --list"),
    };
    let text = match ask(&session.socket, &request, ANSWER_TIMEOUT) {
        Ok(text) => text,
        Err(AskError::Refused(reason)) => bail!(
            "sandbox {} (session {}) refused {what}: {reason}",
            session.sandbox,
            session.pid
        ),
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "cannot ask session {} of sandbox {} for {what}",
                    session.pid, session.sandbox
                )
            });
        }
    };
    if request == Request::Ports {
        print_list(&session, &text)?;
    } else {
        println!(
            "{text} (sandbox {}, session {})",
            session.sandbox, session.pid
        );
    }
    Ok(0)
}

fn print_list(session: &SessionRecord, json: &str) -> anyhow::Result<()> {
    let ports: Vec<ForwardInfo> = serde_json::from_str(json).with_context(|| {
        format!(
            "session {} of sandbox {} listed its forwards in a form this airlock does not read",
            session.pid, session.sandbox
        )
    })?;
    if ports.is_empty() {
        println!(
            "sandbox {} (session {}) forwards no ports",
            session.sandbox, session.pid
        );
    }
    for line in super::sessions::port_lines(&ports) {
        println!("{line}");
    }
    Ok(())
}
