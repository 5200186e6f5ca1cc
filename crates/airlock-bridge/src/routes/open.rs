//! `POST /open {"url"}`: open an http(s) URL in the host's browser.

use std::ffi::OsString;
use std::time::Duration;

use serde::Deserialize;

use super::{Reply, ReplyBody, no_nul, strict};
use crate::audit::{LONG_FIELD, clip};
use crate::launcher;

/// The longest URL accepted, in characters.
pub const MAX_URL_CHARS: usize = 8192;
/// How long the opener may take.
pub const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenRequest {
    pub url: String,
}

/// Decodes and validates a body: the URL to hand to the opener (normalised), or why not.
pub fn decide(body: &[u8]) -> Result<url::Url, String> {
    let request: OpenRequest = strict(body)?;
    validate_url(&request.url)
}

/// http or https (any case), with a host, at most [`MAX_URL_CHARS`], no whitespace or control chars.
pub fn validate_url(raw: &str) -> Result<url::Url, String> {
    no_nul("url", raw)?;
    let chars = raw.chars().count();
    if chars > MAX_URL_CHARS {
        return Err(format!(
            "url is {chars} characters long; the limit is {MAX_URL_CHARS}"
        ));
    }
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("url contains whitespace or control characters".into());
    }
    let Some((scheme, rest)) = raw.split_once(':') else {
        return Err(format!("{} is not a URL (no scheme)", clip(raw, 64)));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!(
            "scheme {}: is not allowed; only http and https URLs open on the host",
            clip(scheme, 32)
        ));
    }
    // Checked on the text: the URL parser would turn `http:///x` into a URL with host `x`.
    let authority = rest
        .strip_prefix("//")
        .map(|r| r.split(['/', '?', '#']).next().unwrap_or(""));
    let host_part = authority.map(|a| a.rsplit('@').next().unwrap_or(""));
    if host_part.is_none_or(|h| h.is_empty() || h.starts_with(':')) {
        return Err(format!("{} has no host", clip(raw, 64)));
    }
    let url =
        url::Url::parse(raw).map_err(|e| format!("{} is not a valid URL: {e}", clip(raw, 64)))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{} has no host", clip(raw, 64)));
    }
    Ok(url)
}

pub async fn serve(body: &[u8], scope: Option<&crate::scope::SessionScope>) -> Reply {
    let url = match decide(body) {
        Ok(url) => url,
        Err(reason) => return Reply::bad_request(reason),
    };
    let mut fields = vec![("url", clip(&loggable(&url), LONG_FIELD))];
    if let Some(Err(reason)) = scope.map(|s| s.allows_open(&url)) {
        return Reply::forbidden(reason).with_fields(fields);
    }
    // Before the browser can follow the callback: the forward is there when it comes back.
    let warning = match (scope, crate::callback::of_url(&url)) {
        (Some(scope), Some(cb)) => callback_forward(scope, &cb, &mut fields).await,
        _ => None,
    };
    let result = match opener() {
        Ok((program, mut args)) => {
            args.push(url.as_str().into());
            launcher::launch(&program, &args, TIMEOUT).await
        }
        Err(e) => Err(e),
    };
    match (result, warning) {
        (Ok(()), None) => Reply::no_content(fields),
        // Opened all the same: the shim prints the warning on the sandbox's side.
        (Ok(()), Some(warning)) => Reply::ok(
            ReplyBody::Json(serde_json::json!({ "warning": warning })),
            fields,
        ),
        (Err(e), _) => Reply::failed(e.to_string()).with_fields(fields),
    }
}

/// Asks the sandbox's supervisor to forward the callback's port; the audit fields name the
/// callback's host and port (never the URL's query) and what became of it. A warning for the
/// sandbox when no forward was made.
async fn callback_forward(
    scope: &crate::scope::SessionScope,
    cb: &crate::callback::Callback,
    fields: &mut Vec<(&'static str, String)>,
) -> Option<String> {
    fields.push(("callback", cb.shown()));
    match crate::callback::forward(scope, cb.port).await {
        Ok(_) => {
            fields.push(("callback_forward", "ok".into()));
            None
        }
        Err(reason) => {
            fields.push((
                "callback_forward",
                clip(&format!("failed ({reason})"), LONG_FIELD),
            ));
            Some(format!(
                "the OAuth callback http://{} was not forwarded into the sandbox: {reason}; the \
                 browser's redirect may not reach the login",
                cb.shown()
            ))
        }
    }
}

/// `xdg-open` from the daemon's PATH on Linux, `/usr/bin/open` on macOS.
fn opener() -> Result<(std::path::PathBuf, Vec<OsString>), launcher::LaunchError> {
    if cfg!(target_os = "macos") {
        Ok((launcher::find("/usr/bin/open")?, Vec::new()))
    } else {
        Ok((launcher::find("xdg-open")?, Vec::new()))
    }
}

/// What the audit log keeps of a URL: scheme, host, port and path. Userinfo (`user:pass@`), the
/// query (`?access_token=`) and the fragment (`#id_token=`) carry secrets often enough to go.
pub fn loggable(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(port) => format!("{}://{host}:{port}{}", url.scheme(), url.path()),
        None => format!("{}://{host}{}", url.scheme(), url.path()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn logged_urls_lose_userinfo_query_and_fragment() {
        let url = url::Url::parse(
            "https://u:SECRET@x.example:8443/cb?access_token=SECRET#id_token=SECRET",
        )
        .expect("url");
        assert_eq!(super::loggable(&url), "https://x.example:8443/cb");
    }

    use super::*;

    #[test]
    fn accepted_urls() {
        for ok in [
            "https://example.com/x",
            "HTTP://example.com",
            "https://user@example.com:8443/a?b=c#d",
            "http://127.0.0.1:8080/callback?code=abc",
            "https://[::1]/",
        ] {
            assert!(validate_url(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refused_urls() {
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS));
        for bad in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "data:text/html,<b>x</b>",
            "ftp://example.com/",
            "https:example.com",
            "http:///path",
            "https://",
            "https://:80/",
            "https://user@/x",
            "https://exa mple.com/",
            "https://example.com/\n",
            "example.com",
            "",
            long.as_str(),
        ] {
            assert!(validate_url(bad).is_err(), "{bad}");
        }
        let reason = validate_url("javascript:alert(1)").unwrap_err();
        assert!(
            reason.contains("javascript") && reason.contains("only http and https"),
            "{reason}"
        );
    }
}
