//! The tabs and panes this sandbox created, learnt from herdr's answers.
//!
//! A tab or pane id in a request is only text the sandbox typed: `w1:p1` is as easy to write as
//! `w1:p3`. Ownership therefore comes from one place, herdr's answer to a `tab.create` the filter
//! itself forwarded ([`observe_response`]): the `tab_created` result names the new tab and its
//! root pane, and only those ids become the sandbox's. A `tab.close` herdr answers `ok` gives them
//! up again. Nothing the client sends is ever recorded.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::decode::{MAX_DEPTH, decode_line, decode_params};
use super::params::TabTargetParams;

/// The most tabs one filter records as owned. A `tab.create` answered past it still created its
/// tab, but the tab stays out of the sandbox's reach, so memory stays bounded whatever it asks.
pub const MAX_OWNED_TABS: usize = 256;

/// The longest tab or pane id recorded, in bytes (herdr's are like `w12:p345`).
pub const MAX_ID_BYTES: usize = 64;

/// The tabs (with their root panes) herdr reported as created by this sandbox's `tab.create`s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owned {
    /// Tab id to the id of its root pane, the only pane such a tab has: the sandbox cannot split.
    tabs: BTreeMap<String, String>,
}

impl Owned {
    /// Nothing owned.
    pub fn new() -> Owned {
        Owned::default()
    }

    /// Whether herdr reported tab `tab_id` as created for this sandbox (and it was not closed).
    pub fn owns_tab(&self, tab_id: &str) -> bool {
        self.tabs.contains_key(tab_id)
    }

    /// Whether `pane_id` is the root pane of an owned tab.
    pub fn owns_pane(&self, pane_id: &str) -> bool {
        self.tabs.values().any(|pane| pane == pane_id)
    }

    /// The number of owned tabs.
    pub fn len(&self) -> usize {
        self.tabs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tabs.is_empty()
    }

    fn record(&mut self, tab_id: &str, pane_id: &str) -> Result<(), &'static str> {
        if self.tabs.len() >= MAX_OWNED_TABS {
            return Err("the table of owned tabs is full");
        }
        if self.owns_tab(tab_id) || self.owns_pane(pane_id) {
            return Err("the answer names a tab or pane already owned");
        }
        self.tabs.insert(tab_id.to_owned(), pane_id.to_owned());
        Ok(())
    }
}

/// What herdr's answer to a forwarded request did to the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// The method does not change ownership (everything but `tab.create` and `tab.close`).
    Unobserved,
    /// herdr created a tab; it and its root pane are now owned.
    Recorded,
    /// herdr closed an owned tab (or no longer knows it); it and its pane are not owned anymore.
    Released,
    /// The answer changed nothing, for this fixed reason (herdr's error, an unexpected shape, a
    /// full table).
    Ignored(&'static str),
}

impl Observed {
    /// The reason for the decision log of a forwarded request.
    pub fn log_reason(self) -> String {
        match self {
            Observed::Unobserved => "forwarded".to_owned(),
            Observed::Recorded => "forwarded; the new tab and its pane are owned".to_owned(),
            Observed::Released => "forwarded; the tab is no longer owned".to_owned(),
            Observed::Ignored(why) => format!("forwarded; nothing recorded ({why})"),
        }
    }
}

/// Records in `owned` what herdr's `response` line to the `forwarded` line (as [`super::decide`]
/// produced it) says: the tab and root pane of a `tab_created` answer to `tab.create`, or the
/// release of the tab a `tab.close` named once herdr answers `ok`, or `tab_not_found` (it was
/// closed some other way).
///
/// Only an answer of exactly the expected shape counts: `{"id": <the request's id>, "result":
/// {"type": "tab_created", "tab": {…}, "root_pane": {…}}}` with no other key in the envelope or
/// the result, no duplicate key anywhere, ids of herdr's charset, and a root pane that lies in
/// that tab and workspace. Inside `tab` and `root_pane` only the ids are read, so fields a later
/// herdr adds to its TabInfo/PaneInfo are ignored there, as herdr asks of clients.
pub fn observe_response(forwarded: &[u8], response: &[u8], owned: &mut Owned) -> Observed {
    let Ok(request) = decode_line(forwarded) else {
        return Observed::Ignored("the forwarded line does not decode");
    };
    match request.method.as_str() {
        "tab.create" => match tab_created(&request.id, response) {
            Ok((tab_id, pane_id)) => match owned.record(&tab_id, &pane_id) {
                Ok(()) => Observed::Recorded,
                Err(why) => Observed::Ignored(why),
            },
            Err(why) => Observed::Ignored(why),
        },
        "tab.close" => {
            let Ok(TabTargetParams { tab_id }) = decode_params(request.params) else {
                return Observed::Ignored("the forwarded line does not decode");
            };
            match tab_gone(&request.id, response) {
                Ok(()) if owned.tabs.remove(&tab_id).is_some() => Observed::Released,
                Ok(()) => Observed::Ignored("the tab was not owned"),
                Err(why) => Observed::Ignored(why),
            }
        }
        _ => Observed::Unobserved,
    }
}

const NOT_TAB_CREATED: &str = "the answer is not a tab_created result";

/// The tab and root pane ids of a `tab_created` answer to request `id`.
fn tab_created(id: &str, response: &[u8]) -> Result<(String, String), &'static str> {
    let result = success(id, response)?;
    if result.len() != 3 || result.get("type") != Some(&Value::from("tab_created")) {
        return Err(NOT_TAB_CREATED);
    }
    let (Some(Value::Object(tab)), Some(Value::Object(pane))) =
        (result.get("tab"), result.get("root_pane"))
    else {
        return Err(NOT_TAB_CREATED);
    };
    let tab_id = herdr_id(tab, "tab_id")?;
    let workspace_id = herdr_id(tab, "workspace_id")?;
    let pane_id = herdr_id(pane, "pane_id")?;
    if herdr_id(pane, "tab_id")? != tab_id || herdr_id(pane, "workspace_id")? != workspace_id {
        return Err("the answer's root pane is not in its tab");
    }
    Ok((tab_id.to_owned(), pane_id.to_owned()))
}

/// Whether herdr's answer to `tab.close` request `id` says the tab no longer exists: `ok`, or its
/// error `tab_not_found`.
fn tab_gone(id: &str, response: &[u8]) -> Result<(), &'static str> {
    let envelope = envelope(id, response)?;
    match (envelope.get("result"), envelope.get("error")) {
        (Some(Value::Object(result)), None)
            if result.len() == 1 && result.get("type") == Some(&Value::from("ok")) =>
        {
            Ok(())
        }
        (None, Some(Value::Object(error)))
            if error.get("code") == Some(&Value::from("tab_not_found")) =>
        {
            Ok(())
        }
        (None, Some(_)) => Err("herdr answered an error"),
        _ => Err("the answer is not an ok result"),
    }
}

/// The `result` object of a success answer to request `id`.
fn success(id: &str, response: &[u8]) -> Result<Map<String, Value>, &'static str> {
    let mut envelope = envelope(id, response)?;
    match envelope.remove("result") {
        Some(Value::Object(result)) => Ok(result),
        _ if envelope.contains_key("error") => Err("herdr answered an error"),
        _ => Err("the answer is neither a result nor an error"),
    }
}

/// herdr's answer line to request `id`, strictly parsed: exactly `id` and one of `result` or
/// `error`.
fn envelope(id: &str, response: &[u8]) -> Result<Map<String, Value>, &'static str> {
    let body = response.strip_suffix(b"\n").unwrap_or(response);
    let envelope = airlock_sockets::strict::parse_object::<MAX_DEPTH, false>(body)
        .map_err(|_| "the answer is not one JSON object")?;
    let one_of = envelope.contains_key("result") != envelope.contains_key("error");
    if envelope.len() != 2 || !one_of {
        return Err("the answer is neither a result nor an error");
    }
    if envelope.get("id") != Some(&Value::from(id)) {
        return Err("the answer is for another request");
    }
    Ok(envelope)
}

/// The id `info[key]`, if it is one herdr could have given: 1 to [`MAX_ID_BYTES`] bytes of ASCII
/// letters, digits, `:`, `_`, `-` and `.`.
fn herdr_id<'a>(info: &'a Map<String, Value>, key: &str) -> Result<&'a str, &'static str> {
    let id = info
        .get(key)
        .and_then(Value::as_str)
        .ok_or(NOT_TAB_CREATED)?;
    let charset = id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b":_-.".contains(&b));
    if id.is_empty() || id.len() > MAX_ID_BYTES || !charset {
        return Err("the answer's ids are not herdr-shaped");
    }
    Ok(id)
}
