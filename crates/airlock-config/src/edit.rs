//! Writing an allow rule into a project's `.airlock.toml` (`airlock network monitor`'s "allow
//! always", after the user confirmed it on the host), keeping the file's comments and layout.
//!
//! The file lives in a tree a sandbox writes, so: it is read without following a link; a file that
//! is not trusted at its current content is refused (the user has not reviewed it, and trusting it
//! now would trust whatever is in it); the new content goes to a new file renamed over the old one
//! (a link planted there is replaced, never written through); and the trust store pins the bytes
//! airlock wrote, not what it reads back.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use crate::load::read_optional_project;
use crate::trust::{TrustStatus, TrustStore};
use crate::{ConfigError, PROJECT_FILE_NAME, XdgPaths};

/// Adds `rule` to `[network] allow` in `project`'s `.airlock.toml` (made when missing) and trusts
/// the result. Returns the file. A rule already there is not added twice.
pub fn add_allow_rule(
    paths: &XdgPaths,
    project: &Path,
    rule: &str,
) -> Result<PathBuf, ConfigError> {
    let file = project.join(PROJECT_FILE_NAME);
    let mut store = TrustStore::load(&paths.trust_file())?;
    let old = read_optional_project(&file)?;
    if let Some(bytes) = &old
        && store.status(project, bytes) != TrustStatus::Trusted
    {
        return Err(ConfigError::EditUntrusted { file });
    }
    let text = old
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let mut doc: toml_edit::DocumentMut =
        text.parse()
            .map_err(|_: toml_edit::TomlError| ConfigError::EditShape {
                file: file.clone(),
                what: "it is not valid TOML",
            })?;
    let network = doc
        .entry("network")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
    let Some(network) = network.as_table_like_mut() else {
        return Err(ConfigError::EditShape {
            file,
            what: "network is not a table",
        });
    };
    let allow = network
        .entry("allow")
        .or_insert(toml_edit::Item::Value(toml_edit::Value::Array(
            toml_edit::Array::new(),
        )));
    let Some(allow) = allow.as_array_mut() else {
        return Err(ConfigError::EditShape {
            file,
            what: "network.allow is not an array",
        });
    };
    if !allow.iter().any(|v| v.as_str() == Some(rule)) {
        allow.push(rule);
    }
    let bytes = doc.to_string().into_bytes();
    // What the loader will say of it, before anything is written.
    store.add_bytes(project, &bytes)?;
    let temp = project.join(format!(".{PROJECT_FILE_NAME}.{}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .and_then(|mut f| f.write_all(&bytes))
        .and_then(|()| std::fs::rename(&temp, &file));
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(ConfigError::Write { path: file, error });
    }
    store.save()?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> (tempfile::TempDir, XdgPaths, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        let project = root.join("proj");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        let text = home.to_string_lossy().into_owned();
        let paths = XdgPaths::from_vars(|k| (k == "HOME").then(|| text.clone())).unwrap();
        (dir, paths, project)
    }

    #[test]
    fn a_rule_is_added_keeping_comments_and_the_file_stays_trusted() {
        let (_d, paths, project) = fixture();
        let file = project.join(PROJECT_FILE_NAME);
        std::fs::write(&file, "# mine\n[network]\nallow = [\"a.test\"] # keep\n").unwrap();
        let mut store = TrustStore::load(&paths.trust_file()).unwrap();
        store.add(&project).unwrap();
        store.save().unwrap();
        add_allow_rule(&paths, &project, "b.test").unwrap();
        add_allow_rule(&paths, &project, "b.test").unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("# mine\n"), "{text}");
        assert!(text.contains("# keep"), "{text}");
        assert_eq!(text.matches("b.test").count(), 1, "{text}");
        let loaded = crate::load(&paths, &project).unwrap();
        let rules: Vec<&str> = loaded
            .profile
            .egress
            .allow
            .iter()
            .map(|r| r.rule.as_str())
            .collect();
        assert_eq!(rules, ["a.test", "b.test"]);
    }

    #[test]
    fn a_missing_file_is_made_and_an_untrusted_one_refused() {
        let (_d, paths, project) = fixture();
        add_allow_rule(&paths, &project, "c.test").unwrap();
        let loaded = crate::load(&paths, &project).unwrap();
        assert_eq!(loaded.profile.egress.allow[0].rule, "c.test");
        // Changed behind the trust store's back: refused, untouched.
        let file = project.join(PROJECT_FILE_NAME);
        std::fs::write(&file, "[sandbox]\nnetwork = \"host\"\n").unwrap();
        let err = add_allow_rule(&paths, &project, "d.test")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not trusted"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "[sandbox]\nnetwork = \"host\"\n"
        );
    }

    #[test]
    fn a_planted_link_is_not_followed() {
        let (_d, paths, project) = fixture();
        let target = project.parent().unwrap().join("bashrc");
        std::fs::write(&target, "precious\n").unwrap();
        std::os::unix::fs::symlink(&target, project.join(PROJECT_FILE_NAME)).unwrap();
        assert!(add_allow_rule(&paths, &project, "e.test").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
    }
}
