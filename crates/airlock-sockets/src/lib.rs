//! airlock-sockets: what every filter of a host control socket shares (herdr's, kitty's, Docker's,
//! the portal's bus). The host's real socket is never mounted into a sandbox; a filter's own socket is,
//! and this crate owns its life:
//!
//! - [`SessionSockets`]: the host-side directory of one session's filter sockets
//!   (`<state root>/sockets/<supervisor pid>/`, outside every sandbox mount), shown inside at
//!   `$HOME/.run/<supervisor pid>/` so a second session never unlinks a live one's socket; removed
//!   when the session ends, and a dead session's left behind is removed at the next launch.
//! - [`serve`]: the accept loop on its own thread, one thread per connection up to a cap, each
//!   connection handed to the filter with a deadline.
//! - [`DecisionLog`]: one line per request in `<state root>/logs/internal/<filter>.log`: method,
//!   decision, reason, never a value the request carried; [`InternalLogs`] reads them back.
//! - [`read_line`]: one newline-terminated request with a size cap and a deadline.
//! - [`strict`]: one JSON object, duplicate keys refused at every depth, nesting capped.
//!
//! And the kitty filter's decisions ([`kitty`]): kitty's remote-control frames, strictly decoded,
//! each command allowed only by a capability a tool declared, launches pinned to a tool's resolved
//! program, windows owned only when kitty's own answer says the sandbox made them; and the
//! overlay launches both terminals run for revdiff ([`overlay`]): the launcher's command read
//! without a shell, run as airlock's own pinned script, its output handed back without
//! following a link the sandbox made.

pub mod docker;
pub mod kitty;
mod lifecycle;
mod line;
mod log;
pub mod overlay;
pub mod portal;
pub mod strict;

pub use lifecycle::{Filter, SessionSockets, serve};
pub use line::{LineError, read_line};
pub use log::{Decision, DecisionLog, InternalLine, InternalLogs};
