//! `airlock trust add|list|remove`: which project `.airlock.toml` files are loaded.

use std::path::{Path, PathBuf};

use airlock_config::{TrustStore, XdgPaths};
use anyhow::Context;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};

use crate::cli::TrustCommand;

pub fn run(command: TrustCommand) -> anyhow::Result<i32> {
    let paths = XdgPaths::from_env()?;
    let mut store = TrustStore::load(&paths.trust_file())?;
    match command {
        TrustCommand::Add { dir } => {
            let dir = project_dir(&paths, dir.as_deref())?;
            let record = store.add(&dir)?;
            store.save()?;
            println!(
                "trusted {} (sha256 {})",
                dir.join(airlock_config::PROJECT_FILE_NAME).display(),
                &record.sha256[..12]
            );
        }
        TrustCommand::Remove { dir } => {
            let dir = project_dir(&paths, dir.as_deref())?;
            if store.remove(&dir)? {
                store.save()?;
                println!("no longer trusted: {}", dir.display());
            } else {
                println!("{} was not trusted", dir.display());
            }
        }
        TrustCommand::List { json } => {
            let entries = store.entries();
            if json {
                println!("{}", serde_json::to_string_pretty(&entries)?);
            } else if entries.is_empty() {
                println!("no trusted projects; trust one with `airlock trust add [DIR]`");
            } else {
                let mut table = Table::new();
                table.load_preset(UTF8_FULL_CONDENSED);
                table.set_header(["PROJECT", "STATUS", "SHA256"]);
                for entry in entries {
                    table.add_row([
                        entry.dir.display().to_string(),
                        entry.status.as_str().to_owned(),
                        entry.sha256.chars().take(12).collect(),
                    ]);
                }
                println!("{table}");
            }
        }
    }
    Ok(0)
}

/// DIR canonicalised, else the current project (git toplevel of the cwd, else the cwd).
fn project_dir(paths: &XdgPaths, dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let given = match dir {
        Some(dir) => dir.to_owned(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let canonical = airlock_config::canonicalize(&given)
        .with_context(|| format!("{}: no such directory", given.display()))?;
    if dir.is_some() {
        return Ok(canonical);
    }
    let home = airlock_config::canonicalize(&paths.home).unwrap_or_else(|_| paths.home.clone());
    Ok(airlock_sandbox::host::project_root(&canonical, &home))
}
