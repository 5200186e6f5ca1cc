//! The systemd user unit `airlock-bridge.service`.

/// The unit's file name under `~/.config/systemd/user/`.
pub const UNIT_NAME: &str = "airlock-bridge.service";

use super::DaemonCommand;

/// Renders the unit. Every value is quoted for systemd (`"`, `\`, `%` and `$` escaped).
pub fn render(cmd: &DaemonCommand) -> String {
    let exec: Vec<String> = cmd.argv().iter().map(|a| quote(a)).collect();
    format!(
        "# Written by `airlock bridge install`; removed by `airlock bridge uninstall`.\n\
         [Unit]\n\
         Description=airlock host bridge (browser, editor, git credentials and sounds for sandboxes)\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={}\n\
         Environment={}\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exec.join(" "),
        quote(&format!("PATH={}", cmd.path)),
    )
}

/// A double-quoted systemd word: backslash and quote escaped, `%` and `$` doubled (specifiers and
/// variable expansion would otherwise rewrite a path that contains them).
pub fn quote(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `systemctl --user` arguments for each step.
pub const DAEMON_RELOAD: &[&str] = &["--user", "daemon-reload"];
pub const ENABLE_NOW: &[&str] = &["--user", "enable", "--now", UNIT_NAME];
pub const DISABLE_NOW: &[&str] = &["--user", "disable", "--now", UNIT_NAME];
pub const IS_ACTIVE: &[&str] = &["--user", "is-active", UNIT_NAME];
pub const STATUS: &[&str] = &["--user", "status", "--no-pager", "--lines=0", UNIT_NAME];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_contract_unit() {
        let unit = render(&DaemonCommand {
            exe: "/opt/air lock/airlock".into(),
            state_dir: "/home/u/.local/state/airlock/bridge".into(),
            config_file: "/home/u/.config/airlock/config.toml".into(),
            path: "/usr/bin:/bin".into(),
        });
        assert!(unit.contains(
            "ExecStart=\"/opt/air lock/airlock\" \"bridge\" \"daemon\" \"--state-dir\" \
             \"/home/u/.local/state/airlock/bridge\" \"--config\" \"/home/u/.config/airlock/config.toml\"\n"
        ), "{unit}");
        for line in [
            "Restart=on-failure\n",
            "RestartSec=2\n",
            "WantedBy=default.target\n",
        ] {
            assert!(unit.contains(line), "{line} in {unit}");
        }
        assert_eq!(quote("a%b$c\"d\\"), "\"a%%b$$c\\\"d\\\\\"");
    }
}
