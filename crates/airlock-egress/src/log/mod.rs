//! The decision log: one JSON object per line in `<state root>/logs/network.jsonl`, appended by a
//! single writer task when each connection closes, rotated at a size cap; and reading it back in
//! `time` order, filtered ([`Query`]), summed per host ([`Stats`]) or followed ([`Reorder`]).

mod order;
mod query;
pub(crate) mod read;
mod record;
mod stats;
pub(crate) mod writer;

pub use order::{FOLLOW_WINDOW, Latest, Reorder};
pub use query::{Query, QueryError, parse_time};
pub use read::{LogReader, Logged};
pub use record::{
    LogDecision, LogRecord, now_rfc3339, rfc3339_from_unix_millis, unix_millis,
    unix_millis_from_rfc3339,
};
pub use stats::{Counts, HostStats, Stats};
