//! `airlock run`'s per-run overrides of the config: `--no-hide-env` over `[sandbox]
//! hide_env_files`, `--git-mode` over `[tools.git] mode`. They are applied to the loaded profile
//! and the validated settings before anything is planned, so the launch, `--print-spec` and
//! `--explain` all see the same values, and a flag always wins over both config files.

use airlock_config::{Profile, ToolValue};
use airlock_tools::Settings;
use anyhow::bail;

use crate::cli::GitModeArg;

/// `--no-hide-env`: the project's `.env` files and `.airlock.toml` are not hidden this run.
pub fn hide_env(profile: &mut Profile, no_hide_env: bool) {
    if no_hide_env {
        profile.hide_env_files = false;
    }
}

/// `--git-mode MODE`: `[tools.git] mode = MODE` for this run. Refused when the config turned the
/// git tool off, since the mode would then have no effect.
pub fn git_mode(
    settings: &mut Settings,
    profile: &Profile,
    mode: Option<GitModeArg>,
) -> anyhow::Result<()> {
    let Some(mode) = mode else {
        return Ok(());
    };
    let git = settings.tools.entry("git".to_owned()).or_default();
    if !git.enabled && mode != GitModeArg::Disabled {
        let origin = profile
            .tools
            .get("git")
            .and_then(|keys| keys.get("enabled"))
            .map_or_else(
                || "the config".to_owned(),
                |s| s.origin.display().to_string(),
            );
        bail!(
            "--git-mode {}: the git tool is turned off ([tools.git] enabled = false in {origin}); \
             set enabled = true there, or drop --git-mode",
            mode.as_str()
        );
    }
    git.values.insert(
        "mode".to_owned(),
        ToolValue::String(mode.as_str().to_owned()),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use airlock_config::ToolSetting;

    use super::*;

    fn profile_with_git(keys: &[(&str, ToolValue)]) -> Profile {
        let mut profile = Profile::default();
        let table = profile.tools.entry("git".to_owned()).or_default();
        for (key, value) in keys {
            table.insert(
                (*key).to_owned(),
                ToolSetting {
                    value: value.clone(),
                    origin: PathBuf::from("/home/u/.config/airlock/config.toml"),
                },
            );
        }
        profile
    }

    fn settings_of(profile: &Profile) -> Settings {
        Settings::from_profile(profile, &airlock_tools::Catalog::builtin()).unwrap()
    }

    #[test]
    fn git_mode_wins_over_the_config() {
        let profile = profile_with_git(&[("mode", ToolValue::String("readonly".into()))]);
        let mut settings = settings_of(&profile);
        git_mode(&mut settings, &profile, Some(GitModeArg::Readwrite)).unwrap();
        assert_eq!(airlock_tools::git::mode(&settings.tool("git")), "readwrite");
        // Without a [tools.git] table too.
        let profile = Profile::default();
        let mut settings = settings_of(&profile);
        git_mode(&mut settings, &profile, Some(GitModeArg::Disabled)).unwrap();
        assert_eq!(airlock_tools::git::mode(&settings.tool("git")), "disabled");
    }

    #[test]
    fn no_flag_keeps_the_config() {
        let profile = profile_with_git(&[("mode", ToolValue::String("readwrite".into()))]);
        let mut settings = settings_of(&profile);
        let before = settings.clone();
        git_mode(&mut settings, &profile, None).unwrap();
        assert_eq!(settings, before);
        let mut profile = Profile::default();
        hide_env(&mut profile, false);
        assert!(profile.hide_env_files);
        hide_env(&mut profile, true);
        assert!(!profile.hide_env_files);
    }

    #[test]
    fn git_mode_with_the_tool_off_names_the_file_and_the_fix() {
        let profile = profile_with_git(&[("enabled", ToolValue::Bool(false))]);
        let mut settings = settings_of(&profile);
        let err = git_mode(&mut settings, &profile, Some(GitModeArg::Readwrite))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--git-mode readwrite: the git tool is turned off ([tools.git] enabled = false in \
             /home/u/.config/airlock/config.toml); set enabled = true there, or drop --git-mode"
        );
        git_mode(&mut settings, &profile, Some(GitModeArg::Disabled)).unwrap();
    }
}
