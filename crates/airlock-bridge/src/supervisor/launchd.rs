//! The LaunchAgent `~/Library/LaunchAgents/dev.airlock.bridge.plist`.

use std::path::Path;

use super::DaemonCommand;

/// The LaunchAgent's label (and the plist's file name).
pub const LABEL: &str = "dev.airlock.bridge";

/// Renders the property list; every string is XML-escaped.
pub fn render(cmd: &DaemonCommand, log_file: &Path) -> String {
    let args: String = cmd
        .argv()
        .iter()
        .map(|a| format!("    <string>{}</string>\n", xml(a)))
        .collect();
    let log = xml(&log_file.to_string_lossy());
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by `airlock bridge install`; removed by `airlock bridge uninstall`. -->
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>{LABEL}</string>
  <key>ProgramArguments</key>
  <array>
{args}  </array>
  <key>EnvironmentVariables</key>
  <dict>
    <key>PATH</key>
    <string>{path}</string>
  </dict>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <true/>
  <key>ProcessType</key>
  <string>Background</string>
  <key>StandardOutPath</key>
  <string>{log}</string>
  <key>StandardErrorPath</key>
  <string>{log}</string>
</dict>
</plist>
"#,
        path = xml(&cmd.path),
    )
}

fn xml(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The launchd domain of the user `uid`.
pub fn domain(uid: u32) -> String {
    format!("gui/{uid}")
}

/// The service target of the bridge in that domain.
pub fn service(uid: u32) -> String {
    format!("gui/{uid}/{LABEL}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plist_parses_with_the_contract_keys() {
        let text = render(
            &DaemonCommand {
                exe: "/Users/u/bin/air<lock>&".into(),
                state_dir: "/Users/u/.local/state/airlock/bridge".into(),
                config_file: "/Users/u/.config/airlock/config.toml".into(),
                path: "/opt/homebrew/bin:/usr/bin".into(),
            },
            Path::new("/Users/u/Library/Logs/airlock-bridge.log"),
        );
        let value = plist::Value::from_reader_xml(text.as_bytes()).expect("a valid plist");
        let dict = value.as_dictionary().expect("a dict");
        assert_eq!(dict["Label"].as_string(), Some(LABEL));
        assert_eq!(dict["RunAtLoad"].as_boolean(), Some(true));
        assert_eq!(dict["KeepAlive"].as_boolean(), Some(true));
        assert_eq!(dict["ProcessType"].as_string(), Some("Background"));
        assert_eq!(
            dict["StandardErrorPath"].as_string(),
            Some("/Users/u/Library/Logs/airlock-bridge.log")
        );
        let args: Vec<&str> = dict["ProgramArguments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_string().unwrap())
            .collect();
        assert_eq!(args[..3], ["/Users/u/bin/air<lock>&", "bridge", "daemon"]);
    }
}
