//! The body of `POST /containers/{id}/exec` (an `ExecConfig`).
//!
//! An exec is a command in a running container, and two of its fields make it more than that:
//! `Privileged` (every capability, every device: the host's, for most containers) and `User`
//! (`root`/uid 0 instead of the container's default). The engine decodes the body with Go's
//! `encoding/json`, which keeps the last of two duplicate keys and matches keys
//! case-insensitively, with Unicode folding (`"privileged"`, `"Uſer"` set the fields too).
//! So the body must be one strict object ([`crate::strict`]: duplicates and case variants
//! refused, depth capped) whose keys are exactly the ExecConfig field names Docker's clients
//! send (any other spelling is refused, not ignored), each of its type or `null` (which Go
//! leaves at the default). Whitespace around the object is allowed: Go's encoder ends the
//! body with a newline.
//!
//! `User` is `user`, `user:group`, `uid` or `uid:gid`; the user part (before the first `:`) is
//! root when it is `root` (names are case-sensitive: `ROOT` is another user) or an integer that
//! Go's `strconv.Atoi` reads as 0 (`0`, `00`, `+0`, `-0`), as runc looks users up. A group of 0
//! is allowed: it grants the root group's file permissions, not uid 0's. The container's default
//! user (`User` absent or empty) is allowed whatever it is.

use serde_json::Value;

use super::{Denial, DockerPolicy};
use crate::strict::{StrictError, parse_object};

/// How many arrays and objects may enclose a value of the body.
const MAX_DEPTH: usize = 8;

const PRIVILEGED: Denial = Denial::new(403, "exec with Privileged is refused");
const ROOT: Denial = Denial::new(
    403,
    "exec as root is refused ([tools.docker] allow_root_exec)",
);
const UNKNOWN_KEY: Denial = Denial::new(403, "exec body has a key outside ExecConfig");
const WRONG_TYPE: Denial = Denial::new(400, "exec body has a field of the wrong type");

#[derive(Clone, Copy)]
enum Kind {
    Bool,
    Text,
    Strings,
    Size,
}

/// The fields of Docker's ExecConfig (the API reference's, `Detach`, which the Go client always
/// sends, and `Container`, which the Python SDK sends), spelled as its clients send them.
fn kind(key: &str) -> Option<Kind> {
    Some(match key {
        "AttachStdin" | "AttachStdout" | "AttachStderr" | "Tty" | "Detach" | "Privileged" => {
            Kind::Bool
        }
        // docker-py names the container in the body too; the engine goes by the path.
        "DetachKeys" | "User" | "WorkingDir" | "Container" => Kind::Text,
        "Env" | "Cmd" => Kind::Strings,
        "ConsoleSize" => Kind::Size,
        _ => return None,
    })
}

fn fits(kind: Kind, value: &Value) -> bool {
    match (kind, value) {
        (_, Value::Null) => true,
        (Kind::Bool, Value::Bool(_)) | (Kind::Text, Value::String(_)) => true,
        (Kind::Strings, Value::Array(items)) => items.iter().all(Value::is_string),
        (Kind::Size, Value::Array(items)) => items.len() == 2 && items.iter().all(Value::is_u64),
        _ => false,
    }
}

/// Whether the `User` value names root (see the module docs).
pub(super) fn is_root(user: &str) -> bool {
    let name = user.split(':').next().unwrap_or("");
    if name == "root" {
        return true;
    }
    let digits = name.strip_prefix(['+', '-']).unwrap_or(name);
    !digits.is_empty() && digits.bytes().all(|b| b == b'0')
}

fn trim(body: &[u8]) -> &[u8] {
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let start = body.iter().position(|b| !ws(b)).unwrap_or(body.len());
    let end = body.iter().rposition(|b| !ws(b)).map_or(start, |i| i + 1);
    &body[start..end]
}

/// Checks an exec body under `policy`.
pub(super) fn check(body: &[u8], policy: &DockerPolicy) -> Result<(), Denial> {
    let object = parse_object::<MAX_DEPTH, true>(trim(body)).map_err(|e| {
        Denial::new(
            400,
            match e {
                StrictError::DuplicateKey | StrictError::CaseVariantKey => {
                    "exec body repeats a key"
                }
                StrictError::TooDeep => "exec body is nested too deeply",
                _ => "exec body is not one strict JSON object",
            },
        )
    })?;
    for (key, value) in &object {
        let kind = kind(key).ok_or(UNKNOWN_KEY)?;
        if !fits(kind, value) {
            return Err(WRONG_TYPE);
        }
    }
    if object.get("Privileged") == Some(&Value::Bool(true)) {
        return Err(PRIVILEGED);
    }
    if let Some(Value::String(user)) = object.get("User")
        && is_root(user)
        && !policy.allow_root_exec
    {
        return Err(ROOT);
    }
    Ok(())
}
