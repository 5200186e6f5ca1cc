//! `xdg-open URL` (and its synonyms, and `$BROWSER`): POST /open. Always exits 0, so an OAuth flow
//! that calls it never blocks on it; whatever went wrong is one line on stderr.

use std::ffi::OsString;
use std::time::Duration;

use super::post;

pub fn run(name: &str, args: &[OsString]) -> i32 {
    let Some(url) = args.iter().find(|a| !a.to_string_lossy().starts_with('-')) else {
        eprintln!(
            "{name}: usage: {name} URL (opens the URL in the host's browser through the airlock bridge)"
        );
        return 0;
    };
    let url = url.to_string_lossy();
    match post(
        "/open",
        &serde_json::json!({ "url": url }),
        Duration::from_secs(15),
    ) {
        Ok(answer) if answer.status == 204 => {}
        // Opened, with something to say (an OAuth callback that could not be forwarded).
        Ok(answer) if answer.status == 200 => {
            let body: Option<serde_json::Value> = serde_json::from_slice(&answer.body).ok();
            if let Some(warning) = body.as_ref().and_then(|b| b["warning"].as_str()) {
                eprintln!("{name}: warning: {}", airlock_config::printable(warning));
            }
        }
        Ok(answer) => eprintln!(
            "{name}: the host did not open {url}: {} (HTTP {}); open it yourself",
            answer.text(),
            answer.status
        ),
        Err(e) => eprintln!("{name}: cannot open {url} on the host: {e}"),
    }
    0
}
