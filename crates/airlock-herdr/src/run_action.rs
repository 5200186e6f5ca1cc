//! `airlock herdr run-action <action> [timeout s]`: invokes an action through herdr and waits for
//! its log record, printing the result line plus the action's stderr; exit 0 when ok is true.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::context::PLUGIN_ID;
use crate::error::{ErrorKind, PluginError, Result};
use crate::herdr::HerdrCli;
use crate::result;

fn records(herdr: &HerdrCli, plugin: &str) -> Result<Vec<Value>> {
    let json = herdr.run(
        &["plugin", "log", "list", "--plugin", plugin, "--limit", "20"],
        "reading the plugin log",
    )?;
    let list = json
        .pointer("/result/logs")
        .or_else(|| json.pointer("/result/entries"))
        .or_else(|| json.get("logs"))
        .or_else(|| json.pointer("/result/records"))
        .or(Some(&json))
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| {
            PluginError::new(
                ErrorKind::Unknown,
                "herdr plugin log list did not return a list of records.",
            )
            .with_output(json.to_string())
        })?;
    Ok(list)
}

/// Invokes `action`, waits up to `timeout` for its record to finish, prints it; the exit code.
pub fn run(action: &str, timeout: Duration) -> Result<i32> {
    let herdr = HerdrCli::resolve()?;
    let plugin = std::env::var("HERDR_PLUGIN_ID")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| PLUGIN_ID.to_owned());
    let before: Vec<String> = records(&herdr, &plugin)?
        .iter()
        .filter_map(|r| r.get("log_id").map(Value::to_string))
        .collect();
    let invoked = herdr.run(
        &["plugin", "action", "invoke", action, "--plugin", &plugin],
        "invoking the action",
    )?;
    let wanted = invoked
        .pointer("/result/log_id")
        .or_else(|| invoked.pointer("/result/log/log_id"))
        .map(Value::to_string);
    let deadline = Instant::now() + timeout;
    loop {
        let found = records(&herdr, &plugin)?.into_iter().rev().find(|r| {
            let id = r.get("log_id").map(Value::to_string);
            match &wanted {
                Some(w) => id.as_ref() == Some(w),
                None => {
                    r.get("action_id").and_then(Value::as_str) == Some(action)
                        && id.is_some_and(|i| !before.contains(&i))
                }
            }
        });
        if let Some(rec) =
            found.filter(|r| r.get("status").and_then(Value::as_str) != Some("running"))
        {
            let stdout = rec.get("stdout").and_then(Value::as_str).unwrap_or("");
            let stderr = rec.get("stderr").and_then(Value::as_str).unwrap_or("");
            let line = stdout.lines().next().unwrap_or("");
            println!("{line}");
            if !stderr.is_empty() {
                eprint!("{stderr}");
            }
            let ok = result::parse(line).and_then(|v| v.get("ok").and_then(Value::as_bool))
                == Some(true);
            return Ok(if ok { 0 } else { 1 });
        }
        if Instant::now() >= deadline {
            return Err(PluginError::new(
                ErrorKind::Unknown,
                format!(
                    "{action} did not finish within {} s; it may be waiting for a popup. Check herdr plugin log list --plugin {plugin}.",
                    timeout.as_secs()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
