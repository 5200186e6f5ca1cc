//! The `HERDR_SANDBOX_RESULT:` line every action prints first.

use serde_json::{Map, Value, json};

use crate::error::{PluginError, trim_output};

/// The marker shared by herdr sandbox plugins, so orchestrators can switch backends.
pub const MARKER: &str = "HERDR_SANDBOX_RESULT:";
pub const SCHEMA_VERSION: u64 = 1;

/// The result line of a successful action, with its per-action fields.
pub fn success(plugin: &str, action: &str, fields: Map<String, Value>) -> String {
    let mut line =
        json!({"schemaVersion": SCHEMA_VERSION, "plugin": plugin, "action": action, "ok": true});
    let obj = line.as_object_mut().expect("a json object literal");
    obj.extend(fields);
    format!("{MARKER} {line}")
}

/// The result line of a failed action: errorKind, message and the captured output (trimmed).
pub fn failure(plugin: &str, action: &str, error: &PluginError) -> String {
    let mut line = json!({
        "schemaVersion": SCHEMA_VERSION, "plugin": plugin, "action": action, "ok": false,
        "errorKind": error.kind.as_str(), "message": error.message,
    });
    if let Some(output) = &error.output {
        line["output"] = Value::String(trim_output(output));
    }
    format!("{MARKER} {line}")
}

/// Parses a result line (for run-action and tests).
pub fn parse(line: &str) -> Option<Value> {
    serde_json::from_str(line.strip_prefix(MARKER)?.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn failure_trims_output_to_4000_chars() {
        let err = PluginError::new(ErrorKind::Unknown, "boom").with_output("é".repeat(5000));
        let v = parse(&failure("airlock.sandbox", "info", &err)).expect("parses");
        assert_eq!(v["output"].as_str().expect("string").chars().count(), 4000);
        assert_eq!(v["errorKind"], "unknown");
        assert_eq!(v["ok"], false);
    }
}
