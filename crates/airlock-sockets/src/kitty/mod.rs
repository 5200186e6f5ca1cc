//! The kitty socket filter's decisions: one `kitty-cmd` frame in, forward or deny out.
//!
//! kitty's remote-control socket grants everything `kitten @` can do: `launch` runs any program
//! on the host, `send-text` types into any window (the user's shells included), `get-text`
//! reads any screen, `ls` lists every window with its environment, `load-config` and
//! `--watcher` run code inside kitty. A sandbox only ever gets a proxy socket, and this module
//! decides what crosses it: `launch` of the enabled tools' declared commands under the
//! matching `launch_*` capability, and, under the `*_owned` capabilities, commands aimed at
//! windows kitty itself reported those launches created. Everything else is denied, with a
//! fixed reason that never quotes the request.
//!
//! All of it is pure code: no sockets, no clock, no environment.
//! - [`FrameBuffer`] / [`parse_frame`] split the byte stream into frames (1 MiB each at most).
//! - [`decide`] judges one frame's JSON under a [`KittyPolicy`] and the [`Owned`] windows; a
//!   forwarded frame is re-serialised from the checked values, never the client's bytes.
//! - [`observe_response`] records the window a forwarded `launch` created, from kitty's answer.
//! - [`filter_ls_response`] cuts kitty's answer to a forwarded `ls` down to owned windows.
//!
//! The connection loop ([`serve`], on airlock-sockets' lifecycle) reads frames from the sandbox, calls
//! [`decide`], and on a forward sends the frame to kitty and, when
//! `expect_response` is set, reads exactly one answer frame: a
//! [`Command::Launch`] answer goes through [`observe_response`] before being relayed, a
//! [`Command::Ls`] answer is replaced by [`filter_ls_response`]'s. On a denial it writes the
//! response and closes the connection, as it does on any [`FrameError`].

pub mod activate;
mod commands;
mod decode;
mod frame;
mod launch;
mod owned;
mod pattern;
mod policy;
mod response;
pub mod serve;

#[cfg(test)]
mod tests;

pub use commands::{Command, UNRECOGNISED_COMMAND, loggable};
pub use decode::{DecodeError, Envelope, MAX_DEPTH, decode_request};
pub use frame::{FRAME_PREFIX, FRAME_SUFFIX, MAX_FRAME_BYTES, MAX_RESPONSE_FRAME_BYTES};
pub use frame::{FrameBuffer, FrameError, Parsed, encode_frame, parse_frame};
pub use owned::{MAX_OWNED_WINDOWS, Owned};
pub use pattern::{ArgShape, LaunchPattern, MAX_FREE_ARG_BYTES, MAX_LAUNCH_ARGS, is_plain_word};
pub use policy::{Capability, KittyPolicy, TITLE_MAX_CHARS};
pub use response::{error_frame, filter_ls_response, observe_response};
pub use serve::{KittyFilter, KittySocket};

/// What to do with one request frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Send `frame` (a whole `kitty-cmd` frame, re-serialised from the validated request) to
    /// kitty. `expect_response`: whether kitty will answer it (the client did not set
    /// `no_response`); the loop reads one answer frame exactly when it is set, so answers are
    /// never paired with the wrong request.
    Forward {
        frame: Vec<u8>,
        cmd: Command,
        expect_response: bool,
    },
    /// Answer the client with `response` (a kitty error frame) and close. `cmd` is for the log
    /// (see [`loggable`]; empty when the envelope did not decode); `reason` is a fixed rule,
    /// never a value from the request.
    Deny {
        response: Vec<u8>,
        cmd: &'static str,
        reason: &'static str,
    },
}

impl Decision {
    /// The command name for the decision log.
    pub fn cmd(&self) -> &'static str {
        match self {
            Decision::Forward { cmd, .. } => cmd.name(),
            Decision::Deny { cmd, .. } => cmd,
        }
    }

    /// Whether the request goes to kitty.
    pub fn is_forward(&self) -> bool {
        matches!(self, Decision::Forward { .. })
    }
}

/// Decides one request: `frame_json` is the JSON inside a frame (see [`FrameBuffer`]).
pub fn decide(frame_json: &[u8], policy: &KittyPolicy, owned: &Owned) -> Decision {
    let envelope = match decode_request(frame_json) {
        Ok(envelope) => envelope,
        Err(err) => return deny("", err.rule()),
    };
    let cmd = loggable(&envelope.cmd);
    match policy::evaluate(envelope, policy, owned) {
        Ok(checked) => Decision::Forward {
            frame: checked.frame,
            cmd: checked.cmd,
            expect_response: checked.expect_response,
        },
        Err(reason) => deny(cmd, reason),
    }
}

/// The denial for bytes that did not even split into frames.
pub fn deny_frame_error(err: FrameError) -> Decision {
    deny("", err.rule())
}

fn deny(cmd: &'static str, reason: &'static str) -> Decision {
    let subject = if cmd.is_empty() { "request" } else { cmd };
    Decision::Deny {
        response: error_frame(&format!(
            "airlock: {subject} is not allowed in this sandbox ({reason})"
        )),
        cmd,
        reason,
    }
}
