//! What herdr's deserializer accepts: the method table of the protocol-20 schema, the parameter
//! types, and the checks a request line goes through before any method sees it.

use serde_json::{Map, Value, json};

/// A request that deserialized: its id, its method (as the table spells it) and its parameters.
pub(super) struct Request {
    pub(super) id: String,
    pub(super) method: &'static str,
    pub(super) params: Map<String, Value>,
}

/// The parameters of every protocol-20 method, extracted from the schema: `name[!][?]:type`, `!`
/// required, `?` nullable; types `s` string, `b` bool, `u` unsigned, `i` integer, `f` number,
/// `o` object, `v` anything, `e=a|b` enum, `[t]` array of `t`, `{t}` map of `t` (`{s?}`: of
/// nullable strings).
pub(super) const SPECS: &[(&str, &str)] = &[
    ("ping", ""),
    ("server.stop", ""),
    (
        "server.live_handoff",
        "expected_protocol?:u expected_version?:s import_exe?:s",
    ),
    ("server.reload_config", ""),
    ("server.agent_manifests", ""),
    ("server.reload_agent_manifests", ""),
    (
        "notification.show",
        "body?:s position?:e=top-left|top-right|bottom-left|bottom-right sound:e=none|done|request title!:s",
    ),
    ("client.window_title.set", "title!:s"),
    ("client.window_title.clear", ""),
    ("session.snapshot", ""),
    ("workspace.create", "cwd?:s env:{s} focus:b label?:s"),
    ("workspace.list", ""),
    ("workspace.get", "workspace_id!:s"),
    ("workspace.focus", "workspace_id!:s"),
    ("workspace.rename", "label!:s workspace_id!:s"),
    ("workspace.move", "insert_index!:u workspace_id!:s"),
    (
        "workspace.move_block",
        "before_workspace_id?:s workspace_ids!:[s]",
    ),
    (
        "workspace.report_metadata",
        "seq?:u source!:s tokens!:{s?} ttl_ms?:u workspace_id!:s",
    ),
    ("workspace.close", "workspace_id!:s"),
    ("worktree.list", "cwd?:s workspace_id?:s"),
    (
        "worktree.create",
        "base?:s branch?:s cwd?:s focus:b label?:s path?:s workspace_id?:s",
    ),
    (
        "worktree.open",
        "branch?:s cwd?:s focus:b label?:s path?:s workspace_id?:s",
    ),
    ("worktree.remove", "force:b workspace_id!:s"),
    (
        "tab.create",
        "cwd?:s env:{s} focus:b label?:s workspace_id?:s",
    ),
    ("tab.list", "workspace_id?:s"),
    ("tab.get", "tab_id!:s"),
    ("tab.focus", "tab_id!:s"),
    ("tab.rename", "label!:s tab_id!:s"),
    ("tab.move", "insert_index!:u tab_id!:s"),
    ("tab.close", "tab_id!:s"),
    ("agent.list", ""),
    ("agent.get", "target!:s"),
    (
        "agent.read",
        "format:e=text|ansi lines?:u source!:e=visible|recent|recent_unwrapped|detection strip_ansi:b target!:s",
    ),
    ("agent.explain", "target!:s"),
    ("agent.send_keys", "keys!:[s] target!:s"),
    ("agent.rename", "name?:s target!:s"),
    ("agent.view.set", "filter?:o label?:s sort:[o] source!:s"),
    ("agent.view.clear", "source?:s"),
    ("agent.focus", "target!:s"),
    (
        "agent.start",
        "args:[s] kind!:s name!:s pane_id!:s timeout_ms?:u",
    ),
    ("agent.prompt", "target!:s text!:s wait?:o"),
    (
        "agent.wait",
        "target!:s timeout_ms?:u until:[e=idle|working|blocked|done|unknown]",
    ),
    (
        "pane.split",
        "cwd?:s direction!:e=right|down env:{s} focus:b ratio?:f right_click:e=herdr|pane target_pane_id?:s workspace_id?:s",
    ),
    (
        "pane.swap",
        "direction?:e=left|right|up|down pane_id?:s source_pane_id?:s target_pane_id?:s",
    ),
    ("pane.move", "destination!:o focus:b pane_id!:s"),
    ("pane.zoom", "mode:e=toggle|on|off pane_id?:s"),
    ("pane.layout", "pane_id?:s"),
    ("pane.process_info", "pane_id?:s"),
    ("layout.export", "pane_id?:s tab_id?:s"),
    (
        "layout.apply",
        "focus:b root!:o tab_id?:s tab_label?:s workspace_id?:s",
    ),
    (
        "layout.set_split_ratio",
        "pane_id?:s path!:[b] ratio!:f tab_id?:s",
    ),
    (
        "pane.neighbor",
        "direction!:e=left|right|up|down pane_id?:s",
    ),
    ("pane.edges", "pane_id?:s"),
    (
        "pane.focus_direction",
        "direction!:e=left|right|up|down pane_id?:s",
    ),
    (
        "pane.resize",
        "amount?:f direction!:e=left|right|up|down pane_id?:s",
    ),
    ("pane.list", "workspace_id?:s"),
    ("pane.current", "caller_pane_id?:s"),
    ("pane.get", "pane_id!:s"),
    ("pane.focus", "pane_id!:s"),
    ("pane.input.set", "pane_id!:s right_click!:e=herdr|pane"),
    ("pane.rename", "label?:s pane_id!:s"),
    ("pane.send_text", "pane_id!:s text!:s"),
    ("pane.send_keys", "keys!:[s] pane_id!:s"),
    ("pane.send_input", "keys:[s] pane_id!:s text:s"),
    (
        "pane.read",
        "format:e=text|ansi lines?:u pane_id!:s source!:e=visible|recent|recent_unwrapped|detection strip_ansi:b",
    ),
    (
        "pane.graphics.set",
        "data_base64:s format!:e=png|rgb|rgba|bgra image_height!:u image_width!:u layer_id?:s pane_id!:s placement:o z_index:i",
    ),
    ("pane.graphics.clear", "layer_id?:s pane_id!:s"),
    ("pane.graphics.info", "pane_id!:s"),
    (
        "pane.report_agent",
        "agent!:s agent_session_id?:s agent_session_path?:s message?:s pane_id!:s seq?:u source!:s state!:e=idle|working|blocked|unknown",
    ),
    (
        "pane.report_agent_session",
        "agent!:s agent_session_id?:s agent_session_path?:s pane_id!:s seq?:u session_start_source?:s source!:s",
    ),
    (
        "pane.report_metadata",
        "agent?:s applies_to_source?:s clear_display_agent:b clear_state_labels:b clear_title:b display_agent?:s pane_id!:s seq?:u source!:s state_labels:{s} title?:s tokens:{s?} ttl_ms?:u",
    ),
    ("pane.clear_agent_authority", "pane_id!:s seq?:u source?:s"),
    ("pane.release_agent", "agent!:s pane_id!:s seq?:u source!:s"),
    ("pane.close", "pane_id!:s"),
    ("popup.close", ""),
    ("events.subscribe", "subscriptions!:[o]"),
    ("events.wait", "match_event!:o timeout_ms?:u"),
    (
        "pane.wait_for_output",
        "lines?:u match!:o pane_id!:s source!:e=visible|recent|recent_unwrapped|detection strip_ansi:b timeout_ms?:u",
    ),
    (
        "integration.install",
        "target!:e=pi|omp|claude|codex|copilot|devin|droid|kimi|opencode|kilo|hermes|qodercli|qwen|cursor|mastracode|antigravity_cli|grok",
    ),
    (
        "integration.uninstall",
        "target!:e=pi|omp|claude|codex|copilot|devin|droid|kimi|opencode|kilo|hermes|qodercli|qwen|cursor|mastracode|antigravity_cli|grok",
    ),
    ("plugin.link", "enabled:b path!:s source?:o"),
    ("plugin.list", "plugin_id?:s"),
    ("plugin.unlink", "plugin_id!:s"),
    ("plugin.enable", "plugin_id!:s"),
    ("plugin.disable", "plugin_id!:s"),
    ("plugin.action.list", "plugin_id?:s"),
    (
        "plugin.action.invoke",
        "action_id!:s context?:o plugin_id?:s",
    ),
    ("plugin.log.list", "limit?:u plugin_id?:s"),
    (
        "plugin.pane.open",
        "cwd?:s direction?:e=right|down entrypoint!:s env:{s} focus:b height?:v placement?:e=overlay|popup|split|tab|zoomed plugin_id!:s target_pane_id?:s width?:v workspace_id?:s",
    ),
    ("plugin.pane.focus", "pane_id!:s"),
    ("plugin.pane.close", "pane_id!:s"),
];

#[derive(Clone, Copy)]
pub(super) enum Ty {
    Str,
    Bool,
    Unsigned,
    Int,
    Number,
    Object,
    Any,
    Enum(&'static str),
    List(&'static str),
    Map(&'static str),
}

pub(super) struct Field {
    pub(super) name: &'static str,
    pub(super) required: bool,
    nullable: bool,
    pub(super) ty: Ty,
}

/// The table's row for `method`: its name and its parameter spec.
pub(super) fn lookup(method: &str) -> Option<(&'static str, &'static str)> {
    SPECS.iter().find(|(name, _)| *name == method).copied()
}

pub(super) fn fields(spec: &'static str) -> impl Iterator<Item = Field> {
    spec.split_whitespace().map(|token| {
        let (mut name, ty) = token.split_once(':').expect("field spec name:type");
        let nullable = name.ends_with('?');
        name = name.trim_end_matches('?');
        let required = name.ends_with('!');
        name = name.trim_end_matches('!');
        Field {
            name,
            required,
            nullable,
            ty: Ty::parse(ty),
        }
    })
}

impl Ty {
    fn parse(ty: &'static str) -> Ty {
        if let Some(variants) = ty.strip_prefix("e=") {
            return Ty::Enum(variants);
        }
        if let Some(inner) = ty.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            return Ty::List(inner);
        }
        if let Some(inner) = ty.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            return Ty::Map(inner);
        }
        match ty {
            "s" => Ty::Str,
            "b" => Ty::Bool,
            "u" => Ty::Unsigned,
            "i" => Ty::Int,
            "f" => Ty::Number,
            "o" => Ty::Object,
            "v" => Ty::Any,
            other => panic!("fake herdr: bad type spec {other}"),
        }
    }

    /// `None` when `value` has this type, else what serde would say was expected.
    fn mismatch(self, value: &Value) -> Option<String> {
        let ok = match self {
            Ty::Str => value.is_string(),
            Ty::Bool => value.is_boolean(),
            Ty::Unsigned => value.is_u64(),
            Ty::Int => value.is_i64() || value.is_u64(),
            Ty::Number => value.is_number(),
            Ty::Object => value.is_object(),
            Ty::Any => true,
            Ty::Enum(variants) => {
                let Some(s) = value.as_str() else {
                    return Some("a string variant".into());
                };
                if variants.split('|').any(|v| v == s) {
                    return None;
                }
                let expected = variants
                    .split('|')
                    .map(|v| format!("`{v}`"))
                    .collect::<Vec<_>>();
                return Some(format!(
                    "one of {} (unknown variant `{s}`)",
                    expected.join(", ")
                ));
            }
            Ty::List(inner) => {
                let Some(items) = value.as_array() else {
                    return Some("a sequence".into());
                };
                let inner = Ty::parse(inner);
                return items.iter().find_map(|item| inner.mismatch(item));
            }
            Ty::Map(inner) => {
                let Some(entries) = value.as_object() else {
                    return Some("a map".into());
                };
                let nullable = inner.ends_with('?');
                let inner = Ty::parse(inner.trim_end_matches('?'));
                return entries
                    .values()
                    .filter(|v| !(nullable && v.is_null()))
                    .find_map(|v| inner.mismatch(v));
            }
        };
        if ok {
            return None;
        }
        Some(
            match self {
                Ty::Str => "a string",
                Ty::Bool => "a boolean",
                Ty::Unsigned => "an unsigned integer",
                Ty::Int => "an integer",
                Ty::Number => "a number",
                _ => "a map",
            }
            .into(),
        )
    }

    pub(super) fn sample(self) -> Value {
        match self {
            Ty::Str | Ty::Any => json!("x"),
            Ty::Bool => json!(false),
            Ty::Unsigned | Ty::Int => json!(0),
            Ty::Number => json!(0.5),
            Ty::Object | Ty::Map(_) => json!({}),
            Ty::List(_) => json!([]),
            Ty::Enum(variants) => json!(variants.split('|').next().unwrap_or("")),
        }
    }
}

/// Roughly serde's name for what a value is, for error messages.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) if n.is_f64() => format!("floating point `{n}`"),
        Value::Number(n) => format!("integer `{n}`"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "sequence".into(),
        Value::Object(_) => "map".into(),
    }
}

/// What herdr's `Request` deserialization accepts (messages shaped like serde's).
pub(super) fn parse_request(value: &Value) -> Result<Request, String> {
    let Some(object) = value.as_object() else {
        return Err(format!(
            "invalid type: {}, expected struct Request",
            describe(value)
        ));
    };
    let string = |key: &str, expected: &str| match object.get(key) {
        None => Err(format!("missing field `{key}`")),
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(other) => Err(format!(
            "invalid type: {}, expected {expected}",
            describe(other)
        )),
    };
    let id = string("id", "a string")?.to_owned();
    let method = string("method", "variant identifier")?;
    let Some((method, spec)) = lookup(method) else {
        return Err(format!("unknown variant `{method}`"));
    };
    let params = match object.get("params") {
        None => return Err("missing field `params`".into()),
        Some(Value::Object(params)) => params.clone(),
        Some(other) => {
            return Err(format!(
                "invalid type: {}, expected a map (params of {method})",
                describe(other)
            ));
        }
    };
    for field in fields(spec) {
        match params.get(field.name) {
            None if field.required => return Err(format!("missing field `{}`", field.name)),
            None => {}
            Some(Value::Null) if field.nullable => {}
            Some(v) => {
                if let Some(expected) = field.ty.mismatch(v) {
                    return Err(format!(
                        "invalid type: {}, expected {expected} (field `{}` of {method})",
                        describe(v),
                        field.name
                    ));
                }
            }
        }
    }
    check_nested(method, &params)?;
    Ok(Request { id, method, params })
}

/// The nested tagged objects herdr decodes for a few methods, checked by their tags.
fn check_nested(method: &str, params: &Map<String, Value>) -> Result<(), String> {
    fn tag<'a>(
        value: &'a Value,
        key: &str,
        allowed: &[&str],
        what: &str,
    ) -> Result<&'a str, String> {
        let Some(found) = value.get(key).and_then(Value::as_str) else {
            return Err(format!("missing field `{key}` ({what})"));
        };
        if allowed.is_empty() || allowed.contains(&found) {
            Ok(found)
        } else {
            Err(format!("unknown variant `{found}` ({what})"))
        }
    }
    fn layout_node(node: &Value) -> Result<(), String> {
        if tag(node, "type", &["pane", "split"], "LayoutNode")? == "split" {
            for key in ["first", "second"] {
                layout_node(
                    node.get(key)
                        .ok_or_else(|| format!("missing field `{key}` (LayoutNode)"))?,
                )?;
            }
            tag(node, "direction", &["right", "down"], "LayoutNode")?;
            if !node.get("ratio").is_some_and(Value::is_number) {
                return Err("missing field `ratio` (LayoutNode)".into());
            }
        }
        Ok(())
    }
    match method {
        "pane.wait_for_output" => {
            tag(
                &params["match"],
                "type",
                &["substring", "regex"],
                "OutputMatch",
            )?;
            if !params["match"].get("value").is_some_and(Value::is_string) {
                return Err("missing field `value` (OutputMatch)".into());
            }
        }
        "events.wait" => {
            tag(&params["match_event"], "event", &[], "EventMatch")?;
        }
        "events.subscribe" => {
            for sub in params["subscriptions"].as_array().into_iter().flatten() {
                tag(sub, "type", &[], "Subscription")?;
            }
        }
        "layout.apply" => layout_node(&params["root"])?,
        "pane.move" => {
            tag(
                &params["destination"],
                "type",
                &["tab", "new_tab", "new_workspace"],
                "PaneMoveDestination",
            )?;
        }
        _ => {}
    }
    Ok(())
}
