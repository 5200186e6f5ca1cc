//! A temp HOME with a project in it, for the config tests that load real files.
#![allow(dead_code)] // each test file uses its own part of it

use std::fs;
use std::path::{Path, PathBuf};

use airlock_config::{ConfigError, LoadedConfig, TrustStore, XdgPaths};

pub struct Home {
    _tmp: tempfile::TempDir,
    pub paths: XdgPaths,
    /// `~/work/app`, canonical.
    pub project: PathBuf,
}

impl Home {
    pub fn new() -> Home {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = fs::canonicalize(tmp.path()).expect("canonical");
        let paths = XdgPaths::from_vars(|k| (k == "HOME").then(|| home.display().to_string()))
            .expect("paths");
        let project = home.join("work/app");
        fs::create_dir_all(&project).expect("project");
        Home {
            _tmp: tmp,
            paths,
            project,
        }
    }

    pub fn home(&self) -> &Path {
        &self.paths.home
    }

    /// Writes the global config; returns its path.
    pub fn global(&self, text: &str) -> PathBuf {
        let file = self.paths.config_file();
        write(&file, text);
        file
    }

    /// Writes `~/<rel>`; returns its path.
    pub fn file(&self, rel: &str, text: &str) -> PathBuf {
        let file = self.home().join(rel);
        write(&file, text);
        file
    }

    /// Writes the project's `.airlock.toml` and trusts it; returns its path.
    pub fn trusted_project(&self, text: &str) -> PathBuf {
        let file = self.project.join(".airlock.toml");
        write(&file, text);
        let mut store = TrustStore::load(&self.paths.trust_file()).expect("store");
        store.add(&self.project).expect("trust");
        store.save().expect("save");
        file
    }

    pub fn load(&self) -> Result<LoadedConfig, ConfigError> {
        airlock_config::load(&self.paths, &self.project)
    }

    pub fn load_err(&self) -> String {
        self.load().expect_err("an error").to_string()
    }
}

pub fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
    fs::write(path, text).expect("write");
}

pub fn assert_contains(msg: &str, needles: &[&str]) {
    for n in needles {
        assert!(msg.contains(n), "expected {n:?} in:\n{msg}");
    }
}
