//! `airlock config show|path|init`, and the config row of `airlock doctor`.

use std::path::PathBuf;

use airlock_config::{LoadedConfig, NetworkMode, ProjectFile, XdgPaths};
use anyhow::{Context, bail};

use airlock_sandbox::doctor::{Check, Status};

use crate::cli::ConfigCommand;

pub fn run(command: ConfigCommand) -> anyhow::Result<i32> {
    let paths = XdgPaths::from_env()?;
    match command {
        ConfigCommand::Show => {
            let (project, loaded) = load_for_cwd(&paths)?;
            println!("# project: {}", project.display());
            for line in sources(&paths, &loaded) {
                println!("# {line}");
            }
            print!("{}", airlock_config::render_profile(&loaded.profile));
        }
        ConfigCommand::Path => {
            let (_, loaded) = load_for_cwd(&paths)?;
            for line in sources(&paths, &loaded) {
                println!("{line}");
            }
            println!("trust store: {}", paths.trust_file().display());
        }
        ConfigCommand::Init { force } => {
            let file = paths.config_file();
            if file.exists() && !force {
                bail!(
                    "{} already exists; edit it, or pass --force to overwrite it",
                    file.display()
                );
            }
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            std::fs::write(&file, airlock_config::init_template())
                .with_context(|| format!("cannot write {}", file.display()))?;
            println!("wrote {}", file.display());
        }
    }
    Ok(0)
}

pub(crate) fn load_for_cwd(paths: &XdgPaths) -> anyhow::Result<(PathBuf, LoadedConfig)> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = airlock_config::canonicalize(&cwd).unwrap_or(cwd);
    let home = airlock_config::canonicalize(&paths.home).unwrap_or_else(|_| paths.home.clone());
    let project = airlock_sandbox::host::project_root(&cwd, &home);
    let loaded = airlock_config::load(paths, &project)?;
    Ok((project, loaded))
}

fn sources(paths: &XdgPaths, loaded: &LoadedConfig) -> Vec<String> {
    let global = paths.config_file();
    let state = if loaded.global.is_some() {
        "loaded"
    } else {
        "absent"
    };
    let project = match &loaded.project {
        ProjectFile::Absent => "none".to_owned(),
        ProjectFile::Trusted(p) => format!("{} (trusted, loaded)", p.display()),
        ProjectFile::Untrusted(p) => format!("{} (not trusted, ignored)", p.display()),
        ProjectFile::Changed(p) => format!("{} (changed since trusted, ignored)", p.display()),
    };
    let mut lines = vec![format!("global config: {} ({state})", global.display())];
    // `[[include]]` files whose glob matched this project, between the two, in order.
    for file in &loaded.includes {
        lines.push(format!("included config: {} (loaded)", file.display()));
    }
    lines.push(format!("project config: {project}"));
    lines
}

/// The `config` and `network` rows of `airlock doctor`: do the files parse, is the project file
/// trusted, and which network mode and egress policy a run here gets.
/// `airlock network explain HOST[:PORT]`: the decision this project's policy makes for it, and why.
pub fn explain_host(authority: &str) -> anyhow::Result<i32> {
    let paths = XdgPaths::from_env()?;
    let (_, loaded) = load_for_cwd(&paths)?;
    let policy = airlock_egress::EgressPolicy::from_settings(&loaded.profile.egress, &[], &[])?;
    let (host, port) = airlock_egress::parse_authority(authority, Some(443))?;
    let decision = policy.decide(&host, port);
    let target = host.to_authority(port);
    let by = match (&decision.rule, &decision.origin) {
        (Some(rule), Some(origin)) => format!("rule {rule:?} from {origin}"),
        (Some(rule), None) => format!("rule {rule:?}"),
        _ => "no rule matches it".to_owned(),
    };
    if decision.allowed {
        println!("{target} is allowed: {by}");
        println!(
            "its addresses are still checked when it is reached: a loopback, private or \
             metadata address needs allow_private or a rule naming the address"
        );
        Ok(0)
    } else {
        println!("{target} is denied: {by}");
        if decision.rule.is_none() {
            println!(
                "to allow it: allow = [{:?}] under [network] in {} (or --allow-host {})",
                host.to_string(),
                paths.config_file().display(),
                host
            );
        }
        Ok(1)
    }
}

pub fn doctor_rows() -> Vec<Check> {
    let result = XdgPaths::from_env()
        .map_err(anyhow::Error::from)
        .and_then(|paths| load_for_cwd(&paths));
    let loaded = match result {
        Ok((_, loaded)) => loaded,
        Err(e) => {
            return vec![Check {
                name: "config",
                status: Status::Fail,
                detail: format!("{e:#}"),
                fix: Some(
                    "fix the file named above (`airlock config init` prints every key)".into(),
                ),
            }];
        }
    };
    let warnings = loaded.warnings();
    let config = Check {
        name: "config",
        status: if warnings.is_empty() {
            Status::Ok
        } else {
            Status::Warn
        },
        detail: if warnings.is_empty() {
            "config files are valid".into()
        } else {
            warnings.join("; ")
        },
        fix: None,
    };
    let mut rows = vec![config, network_row(&loaded.profile)];
    rows.extend(credentials_row(&loaded.profile));
    rows.extend(backend_rows(&loaded.profile));
    rows
}

/// The backend a launch from here uses and why, and each backend's availability.
fn backend_rows(profile: &airlock_config::Profile) -> Vec<Check> {
    let env = std::env::var_os("AIRLOCK_BACKEND").filter(|v| !v.is_empty());
    let why = match (profile.backend, &env) {
        (Some(_), _) => "[sandbox] backend",
        (None, Some(_)) => "$AIRLOCK_BACKEND",
        (None, None) => "the default; run --backend or [sandbox] backend choose another",
    };
    let selected = airlock_sandbox::backend::choose(None, profile.backend, env.as_deref());
    let home = XdgPaths::from_env().map(|p| p.home).unwrap_or_default();
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let view = airlock_tools::HostView::from_env(&home);
    let bwrap = view.find_host_program("bwrap", &cwd);
    let container = airlock_sandbox::backend::container::resolve(
        &profile.container,
        &|name| view.find_host_program(name, &cwd),
        &|name| std::env::var(name).ok(),
    );
    let sbx = airlock_herdr::sbx_run::resolve(
        view.find_host_program("sbx", &cwd),
        crate::commands::run::carried_variables(profile),
    );
    airlock_sandbox::backend::doctor_rows(
        selected,
        why,
        bwrap.as_deref(),
        container.as_ref().map_err(Clone::clone),
        airlock_herdr::sbx_run::doctor_row(sbx.as_ref().map_err(Clone::clone)),
    )
}

/// The agents that read a variable a preset sets to the placeholder.
fn agents_of(var: &str) -> &'static str {
    match var {
        "ANTHROPIC_API_KEY" => " (claude, aider, opencode, pi)",
        "OPENAI_API_KEY" => " (codex, aider, opencode)",
        "GEMINI_API_KEY" => " (gemini)",
        "GH_TOKEN" => " (gh, copilot)",
        _ => "",
    }
}

/// `[network.credentials]`: each rule, whether its value can be read now (never shown), whether
/// the policy lets its hosts through, and which agents it wires; `None` without rules.
fn credentials_row(profile: &airlock_config::Profile) -> Option<Check> {
    if profile.credentials.is_empty() {
        return None;
    }
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let home = std::path::PathBuf::from(env.get("HOME").cloned().unwrap_or_default());
    let policy = airlock_egress::EgressPolicy::from_settings(&profile.egress, &[], &[]).ok();
    let mut problems = Vec::new();
    let mut parts = Vec::new();
    for c in profile.credentials.values() {
        let source = airlock_egress::inject::Source::new(&c.source, &env, &home);
        let readable = match source.read() {
            Ok(_) => "readable".to_owned(),
            Err(why) => {
                problems.push(format!("{}: {why}", c.name));
                "NOT readable".to_owned()
            }
        };
        for host in &c.hosts {
            let allowed = policy.as_ref().is_some_and(|p| {
                airlock_egress::parse_authority(host, Some(443))
                    .map(|(h, port)| p.decide(&h, port).allowed)
                    .unwrap_or(false)
            });
            if !allowed {
                problems.push(format!(
                    "{}: {host} is not allowed by the network policy, so the rule is never used",
                    c.name
                ));
            }
        }
        let inside = match &c.placeholder_env {
            Some(var) => format!("; inside {var}={}{}", c.placeholder, agents_of(var)),
            None => String::new(),
        };
        parts.push(format!(
            "{} → {} ({}, {} {readable}{inside})",
            c.name,
            c.hosts.join(", "),
            c.header,
            c.source.describe()
        ));
    }
    if profile.network != NetworkMode::Proxy {
        problems.push(format!(
            "the network mode is {}: credentials are injected only with --network proxy",
            profile.network.as_str()
        ));
    }
    Some(Check {
        name: "credentials",
        status: if problems.is_empty() {
            Status::Ok
        } else {
            Status::Warn
        },
        detail: parts.join("; "),
        fix: (!problems.is_empty()).then(|| problems.join("; ")),
    })
}

fn network_row(profile: &airlock_config::Profile) -> Check {
    let egress = &profile.egress;
    let policy = airlock_egress::EgressPolicy::from_settings(egress, &[], &[]);
    let (status, detail, fix) = match (profile.network, policy) {
        (_, Err(e)) => (Status::Fail, e.to_string(), Some("fix the rule named above".to_owned())),
        (NetworkMode::Proxy, Ok(_)) => (
            Status::Ok,
            format!(
                "proxy: preset {}, {} allow and {} deny rules{}",
                egress.preset.as_str(),
                egress.allow.len(),
                egress.deny.len(),
                if egress.allow_private { ", private addresses allowed" } else { "" }
            ),
            None,
        ),
        (NetworkMode::None, Ok(_)) => (Status::Ok, "none: loopback only".to_owned(), None),
        (NetworkMode::Host, Ok(_)) => (
            Status::Warn,
            "host: the sandbox shares the host's network, unfiltered".to_owned(),
            Some("set [sandbox] network = \"proxy\" (the default) unless a task needs the host's network".to_owned()),
        ),
    };
    Check {
        name: "network",
        status,
        detail,
        fix,
    }
}
