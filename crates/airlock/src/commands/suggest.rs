//! `airlock network suggest`: the allow rules a sandbox's network log asks for, as TOML to paste
//! under `[network]` (or JSON).

use std::path::PathBuf;

use airlock_config::XdgPaths;
use airlock_egress::log::{LogReader, Query};
use airlock_egress::suggest::{SuggestOptions, Usage, suggest};
use anyhow::Context;

use super::logs::{report_unreadable, sandbox_root};

#[derive(Debug, clap::Args)]
pub struct SuggestArgs {
    /// The sandbox whose log is read (see `airlock sandboxes list`); default: the current project's
    #[arg(long, value_name = "NAME", conflicts_with = "all")]
    pub sandbox: Option<String>,
    /// Read every sandbox's log
    #[arg(long)]
    pub all: bool,
    /// Leave out hosts with fewer requests than N
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub min_requests: u64,
    /// Only hosts that were denied at least once
    #[arg(long)]
    pub denied_only: bool,
    /// Print JSON: {sandboxes, requests, allow: [{rule, hosts, requests, allowed, denied, errors}],
    /// hosts: [{host, requests, allowed, denied, errors, verdict, rule, origin, address}], left_out,
    /// min_requests}
    #[arg(long)]
    pub json: bool,
}

pub fn run(paths: &XdgPaths, args: &SuggestArgs) -> anyhow::Result<i32> {
    // Hosts are judged against the policy `airlock network explain` uses: this directory's.
    let (_, loaded) = super::config::load_for_cwd(paths)?;
    let policy = airlock_egress::EgressPolicy::from_settings(&loaded.profile.egress, &[], &[])?;
    let mut usage = Usage::default();
    let mut read = Vec::new();
    for (name, log) in logs(paths, args)? {
        let mut reader = LogReader::new(&log);
        if !reader.exists() {
            continue;
        }
        reader
            .scan(&Query::default(), |logged| usage.add(&logged))
            .with_context(|| format!("cannot read {}", log.display()))?;
        report_unreadable(reader.take_unreadable(), &log);
        read.push(name);
    }
    if read.is_empty() {
        eprintln!(
            "no network decisions logged yet (they are written when a sandbox runs with --network proxy)"
        );
    }
    let options = SuggestOptions {
        min_requests: args.min_requests,
        denied_only: args.denied_only,
    };
    let local = airlock_egress::local_addresses();
    let suggestion = suggest(&usage, &policy, &local, read, options);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&suggestion)?);
    } else {
        print!("{}", suggestion.to_toml());
    }
    Ok(0)
}

/// The sandboxes to read and their decision logs: `--all`, `--sandbox NAME`, or this project's.
fn logs(paths: &XdgPaths, args: &SuggestArgs) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let log = |root: PathBuf| root.join("logs").join("network.jsonl");
    if args.all {
        let options = airlock_sandbox::state::ListOptions { sizes: false };
        let infos = airlock_sandbox::state::list_with(
            &paths.sandboxes_dir(),
            &paths.locks_dir(),
            &options,
        )?;
        return Ok(infos.into_iter().map(|i| (i.name, log(i.path))).collect());
    }
    let (name, root) = sandbox_root(paths, args.sandbox.as_deref())?;
    Ok(vec![(name, log(root))])
}
