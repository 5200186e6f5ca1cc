//! `paplay FILE`: the name herdr probes for first. Sends the file's bytes (base64) to POST /sound,
//! since the host cannot read the sandbox's /tmp. Fails silently: exit 1, nothing printed.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;

use super::post;

/// The most bytes sent (the daemon's cap is 512 KiB of JSON).
const FILE_CAP: u64 = 380 * 1024;

pub fn run(args: &[OsString]) -> i32 {
    let Some(file) = args
        .iter()
        .rev()
        .find(|a| !a.to_string_lossy().starts_with('-'))
    else {
        return 1;
    };
    let path = Path::new(file);
    let Ok(meta) = std::fs::metadata(path) else {
        return 1;
    };
    if meta.len() > FILE_CAP {
        return 1;
    }
    let Ok(bytes) = std::fs::read(path) else {
        return 1;
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    match post(
        "/sound",
        &serde_json::json!({ "name": name, "data": data }),
        Duration::from_secs(10),
    ) {
        Ok(answer) if answer.status == 200 => 0,
        _ => 1,
    }
}
