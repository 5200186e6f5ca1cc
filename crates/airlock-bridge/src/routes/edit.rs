//! `POST /edit {"editor","path"}`: open an existing host path in the host's VS Code or VSCodium.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::{Reply, no_nul, strict};
use crate::audit::{LONG_FIELD, clip};
use crate::launcher::{self, LaunchError};

/// How long the editor launcher may take.
pub const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditRequest {
    pub editor: String,
    pub path: String,
}

/// The editors the bridge launches; a client's string is only compared, never exec'd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Editor {
    Code,
    Codium,
}

impl Editor {
    pub const ALL: [Editor; 2] = [Editor::Code, Editor::Codium];

    pub fn from_name(name: &str) -> Option<Editor> {
        Editor::ALL.into_iter().find(|e| e.command() == name)
    }

    /// The CLI looked up on the daemon's PATH.
    pub const fn command(self) -> &'static str {
        match self {
            Editor::Code => "code",
            Editor::Codium => "codium",
        }
    }

    /// The macOS application `open -a` falls back to when the CLI is not installed.
    pub const fn mac_app(self) -> &'static str {
        match self {
            Editor::Code => "Visual Studio Code",
            Editor::Codium => "VSCodium",
        }
    }
}

/// Decodes and validates a body (pure: existence is checked by [`serve`]).
pub fn decide(body: &[u8]) -> Result<(Editor, PathBuf), String> {
    let request: EditRequest = strict(body)?;
    let editor = Editor::from_name(&request.editor).ok_or_else(|| {
        format!(
            "editor {} is not allowed; allowed: code, codium",
            clip(&request.editor, 64)
        )
    })?;
    Ok((editor, clean_path(&request.path)?))
}

/// An absolute path with `.`, `..` and repeated slashes resolved lexically (like Go's filepath.Clean).
pub fn clean_path(raw: &str) -> Result<PathBuf, String> {
    no_nul("path", raw)?;
    if raw.is_empty() {
        return Err("path is empty".into());
    }
    if !raw.starts_with('/') {
        return Err(format!(
            "path {} is not absolute; send the host path",
            clip(raw, LONG_FIELD)
        ));
    }
    let mut out = PathBuf::from("/");
    for component in Path::new(raw).components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(out)
}

pub async fn serve(body: &[u8], scope: Option<&crate::scope::SessionScope>) -> Reply {
    let (editor, path) = match decide(body) {
        Ok(decided) => decided,
        Err(reason) => return Reply::bad_request(reason),
    };
    let fields = vec![
        ("editor", editor.command().to_owned()),
        ("path", clip(&path.to_string_lossy(), LONG_FIELD)),
    ];
    let path = match scope.map(|s| s.allows_edit(&path)) {
        Some(Ok(real)) => real,
        Some(Err(reason)) => return Reply::forbidden(reason).with_fields(fields),
        None => path,
    };
    if std::fs::metadata(&path).is_err() {
        return Reply::bad_request(format!(
            "path {} does not exist on the host",
            clip(&path.to_string_lossy(), LONG_FIELD)
        ))
        .with_fields(fields);
    }
    let (program, mut args) = match launcher::find(editor.command()) {
        Ok(program) => (program, Vec::<OsString>::new()),
        Err(LaunchError::NotFound(_)) if cfg!(target_os = "macos") => (
            PathBuf::from("/usr/bin/open"),
            vec!["-a".into(), editor.mac_app().into()],
        ),
        Err(e) => return Reply::failed(e.to_string()).with_fields(fields),
    };
    args.push(path.into_os_string());
    match launcher::launch(&program, &args, TIMEOUT).await {
        Ok(()) => Reply::no_content(fields),
        Err(e) => Reply::failed(e.to_string()).with_fields(fields),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned() {
        assert_eq!(clean_path("/a/./b//c/../d/").unwrap(), Path::new("/a/b/d"));
        assert_eq!(clean_path("/../../etc").unwrap(), Path::new("/etc"));
        for bad in ["", "rel/x", "./x", "~/x", "/a\0b"] {
            assert!(clean_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn editors_are_an_allowlist() {
        assert!(decide(br#"{"editor":"code","path":"/x"}"#).is_ok());
        assert!(decide(br#"{"editor":"codium","path":"/x"}"#).is_ok());
        for bad in ["vim; rm -rf /", "Code", "/usr/bin/code", "", "vim"] {
            let body = serde_json::json!({"editor": bad, "path": "/x"}).to_string();
            assert!(decide(body.as_bytes()).is_err(), "{bad}");
        }
    }
}
