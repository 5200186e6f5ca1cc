//! `POST /sound {"name","data"}`: play MP3 bytes on the host. The caller sends bytes, never a path;
//! the daemon names the temp file and picks the player, so nothing a caller sends reaches exec.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;

use super::{Reply, ReplyBody, strict};
use crate::audit::{SHORT_FIELD, clip};
use crate::launcher;

/// A player is killed after this long; the reaper then removes the temp file.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// The Linux player chain, first installed wins, with the arguments that make each one quiet.
pub const LINUX_PLAYERS: &[(&str, &[&str])] = &[
    ("paplay", &[]),
    ("pw-play", &[]),
    ("ffplay", &["-nodisp", "-autoexit", "-loglevel", "quiet"]),
    ("mpg123", &["-q"]),
    ("mpv", &["--no-video", "--really-quiet"]),
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoundRequest {
    pub name: String,
    pub data: String,
}

/// Decodes and validates a body: the sound's name (for the log) and its bytes.
pub fn decide(body: &[u8]) -> Result<(String, Vec<u8>), String> {
    // serde's messages could quote part of `data`; a decoding error is reported without detail.
    let request: SoundRequest = strict(body).map_err(|_| {
        "malformed request: expected {\"name\": string, \"data\": base64 string}".to_owned()
    })?;
    if request.data.is_empty() {
        return Err("data is empty; send the sound's bytes as base64".into());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(request.data.as_bytes())
        .map_err(|_| "data is not valid base64 (standard alphabet, padded)".to_owned())?;
    if bytes.is_empty() {
        return Err("data decodes to no bytes".into());
    }
    Ok((request.name, bytes))
}

/// The player for this host, with its arguments (the file is appended).
fn player() -> Option<(PathBuf, Vec<OsString>)> {
    if cfg!(target_os = "macos") {
        let program = launcher::find("afplay").ok()?;
        return Some((program, Vec::new()));
    }
    LINUX_PLAYERS.iter().find_map(|(name, args)| {
        let program = launcher::find(name).ok()?;
        Some((program, args.iter().map(OsString::from).collect()))
    })
}

/// Plays the sound in `body`; its file goes in `dir` (the daemon's own, emptied at its start),
/// else the temp dir.
pub fn serve(body: &[u8], dir: Option<&std::path::Path>) -> Reply {
    let (name, bytes) = match decide(body) {
        Ok(decided) => decided,
        Err(reason) => return Reply::bad_request(reason),
    };
    let fields = vec![
        ("name", clip(&name, SHORT_FIELD)),
        ("bytes", bytes.len().to_string()),
    ];
    let Some((program, mut args)) = player() else {
        return Reply::failed("no mp3-capable audio player available").with_fields(fields);
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix("airlock-sound-").suffix(".mp3");
    let file = match dir {
        Some(dir) => builder.tempfile_in(dir),
        None => builder.tempfile(),
    }
    .and_then(|mut f| f.write_all(&bytes).and_then(|()| f.flush()).map(|()| f));
    let file = match file {
        Ok(file) => file.into_temp_path(),
        Err(e) => {
            return Reply::failed(format!("cannot write the sound file: {e}")).with_fields(fields);
        }
    };
    args.push(file.as_os_str().to_owned());
    // The reaper owns the temp path: dropping it after the player is gone removes the file.
    match launcher::spawn_detached(&program, &args, DEADLINE, move || drop(file)) {
        Ok(()) => Reply::ok(ReplyBody::Empty, fields),
        Err(e) => Reply::failed(e.to_string()).with_fields(fields),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_must_be_non_empty_base64() {
        assert_eq!(
            decide(br#"{"name":"done","data":"SUQz"}"#),
            Ok(("done".to_owned(), b"ID3".to_vec()))
        );
        for bad in [
            r#"{"name":"done","data":""}"#,
            r#"{"name":"done","data":"!!!"}"#,
            r#"{"name":"done","data":"SUQ"}"#,
            r#"{"name":"done","data":"SU Qz"}"#,
            r#"{"name":"done"}"#,
            r#"{"name":"done","data":"SUQz","path":"/etc/passwd"}"#,
        ] {
            assert!(decide(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
