//! What every request handler shares.

use crate::audit::AuditLog;
use crate::commands::CommandTable;
use crate::rate::Buckets;
use crate::token::Token;

/// The daemon's shared state: the token to check, the log, the buckets and the host commands.
#[derive(Debug)]
pub struct BridgeState {
    pub token: Token,
    pub audit: AuditLog,
    pub buckets: Buckets,
    pub commands: CommandTable,
}
