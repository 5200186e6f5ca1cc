//! What every request handler shares.

use crate::audit::AuditLog;
use crate::commands::CommandTable;
use crate::paths::BridgePaths;
use crate::rate::Buckets;
use crate::token::Token;

/// The daemon's shared state: the token to check, the log, the buckets and the host commands.
#[derive(Debug)]
pub struct BridgeState {
    pub token: Token,
    pub audit: AuditLog,
    pub buckets: Buckets,
    pub commands: CommandTable,
    /// Where the per-session records are (`None`: session tokens are not accepted).
    pub sessions: Option<BridgePaths>,
    /// `[bridge] shared_token`: the install-time token works too, with no sandbox scope.
    pub shared_token: bool,
}
