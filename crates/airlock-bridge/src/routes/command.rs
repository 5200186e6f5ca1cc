//! `POST /command {"command","args"}`: run an allowlisted verb of a host command configured in
//! `[bridge.commands.<name>]` (or the built-in `proximo`), arguments passed as an argv.

use std::ffi::OsString;

use serde::Deserialize;

use super::{Reply, no_nul, run_for_output, strict};
use crate::audit::{LONG_FIELD, SHORT_FIELD, clip};
use crate::commands::{CommandTable, HostCommand, check_invocation};
use crate::launcher::{self, Invocation};

/// The most output returned from one run (the rest is cut).
pub const OUTPUT_CAP: usize = 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandRequest {
    pub command: String,
    pub args: Vec<String>,
}

/// Decodes and validates a body against the host's command table.
pub fn decide<'t>(
    table: &'t CommandTable,
    body: &[u8],
) -> Result<(&'t str, &'t HostCommand, Vec<String>), String> {
    let request: CommandRequest = strict(body)?;
    let Some((name, command)) = table.commands.get_key_value(&request.command) else {
        let known: Vec<&str> = table.names().collect();
        return Err(format!(
            "command {} is not configured on the host; configured: {} \
             (add [bridge.commands.<name>] to the host's ~/.config/airlock/config.toml)",
            clip(&request.command, SHORT_FIELD),
            known.join(", ")
        ));
    };
    for arg in &request.args {
        no_nul("an argument", arg)?;
    }
    check_invocation(command, &request.args)?;
    Ok((name.as_str(), command, request.args))
}

/// `/proximo`'s body: the verb, and its arguments when there are any.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProximoRequest {
    command: String,
    #[serde(default)]
    args: Vec<String>,
}

/// `/proximo {"command": verb, "args"?}` served as `/command {"command": "proximo", "args":
/// [verb, args…]}`: the same table, verbs, refused flags and log line.
pub async fn serve_proximo(table: &CommandTable, body: &[u8]) -> Reply {
    match proximo_as_command(body) {
        Ok(body) => serve(table, body.as_bytes()).await,
        Err(reason) => Reply::bad_request(reason),
    }
}

/// Decodes a `/proximo` body into the `/command` body it stands for (then given to [`decide`]).
pub fn proximo_as_command(body: &[u8]) -> Result<String, String> {
    let request: ProximoRequest = strict(body)?;
    let args: Vec<String> = std::iter::once(request.command)
        .chain(request.args)
        .collect();
    Ok(serde_json::json!({"command": "proximo", "args": args}).to_string())
}

pub async fn serve(table: &CommandTable, body: &[u8]) -> Reply {
    let (name, command, args) = match decide(table, body) {
        Ok(decided) => decided,
        Err(reason) => return Reply::bad_request(reason),
    };
    let fields = vec![
        ("command", name.to_owned()),
        ("args", clip(&args.join(" "), LONG_FIELD)),
    ];
    let program = match launcher::find(&command.program) {
        Ok(program) => program,
        Err(e) => return Reply::failed(e.to_string()).with_fields(fields),
    };
    let argv: Vec<OsString> = args.into_iter().map(OsString::from).collect();
    run_for_output(
        Invocation {
            program: &program,
            args: &argv,
            env: &[],
            stdin: None,
            timeout: command.timeout,
            output_cap: OUTPUT_CAP,
            merge_stderr: true,
        },
        fields,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decide_against_the_builtin_table() {
        let table = CommandTable::from_config(&Default::default()).unwrap();
        let d =
            |v: serde_json::Value| decide(&table, v.to_string().as_bytes()).map(|(n, _, a)| (n, a));
        assert_eq!(
            d(serde_json::json!({"command": "proximo", "args": ["status", "--json"]})),
            Ok(("proximo", vec!["status".to_owned(), "--json".to_owned()]))
        );
        for bad in [
            serde_json::json!({"command": "proximo", "args": ["install"]}),
            serde_json::json!({"command": "proximo", "args": ["up", "-o/tmp/x"]}),
            serde_json::json!({"command": "proximo", "args": ["status", "-jo"]}),
            serde_json::json!({"command": "proximo", "args": ["status", "--output=x"]}),
            serde_json::json!({"command": "proximo", "args": ["errors", "dom"]}),
            serde_json::json!({"command": "bash", "args": ["-c", "id"]}),
            serde_json::json!({"command": "proximo"}),
            serde_json::json!({"command": "proximo", "args": "status"}),
        ] {
            assert!(d(bad.clone()).is_err(), "{bad}");
        }
    }
}
