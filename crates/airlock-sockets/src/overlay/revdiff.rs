//! revdiff's command line as a sandbox may ask the host to run it.
//!
//! revdiff runs on the host, outside every sandbox layer, with arguments the sandbox chose. Most
//! of its options only change what is shown; some read or write host files (`--output`,
//! `--history-dir`, `--config`, `--keys`, `--annotations`, `--description-file`, `--compare-*`,
//! `--install-theme`, `--init-*`) and are refused, except `--output`, which must name a file
//! directly in the session's shared temp directory and is then redirected (see
//! [`super::script`]). Options are matched by allowlist, so one revdiff adds later is refused
//! until it is looked at.

use std::path::{Component, Path};

/// revdiff's options that take no value.
const FLAGS: &[&str] = &[
    "--staged",
    "--untracked",
    "--no-colors",
    "--no-status-bar",
    "--no-confirm-discard",
    "--no-mouse",
    "--wrap",
    "--collapsed",
    "--compact",
    "--cross-file-hunks",
    "--line-numbers",
    "--blame",
    "--word-diff",
    "--vim-motion",
    "--all-files",
    "-A",
];

/// What kind of value an option takes.
#[derive(Clone, Copy)]
enum Value {
    /// A small decimal number.
    Number,
    /// A theme or style name.
    Name,
    /// A file path or prefix, relative to the project (or inside the shared temp directory).
    Path,
    /// Free text for revdiff's info popup.
    Text,
    /// The annotations file revdiff writes.
    Output,
}

/// revdiff's options that take a value, long and short spellings.
const VALUED: &[(&str, Value)] = &[
    ("--tree-width", Value::Number),
    ("--tab-width", Value::Number),
    ("--wrap-indent", Value::Number),
    ("--compact-context", Value::Number),
    ("--chroma-style", Value::Name),
    ("--theme", Value::Name),
    ("--exclude", Value::Path),
    ("-X", Value::Path),
    ("--include", Value::Path),
    ("-I", Value::Path),
    ("--only", Value::Path),
    ("-F", Value::Path),
    ("--description", Value::Text),
    ("--output", Value::Output),
    ("-o", Value::Output),
];

/// The longest `--description`, in characters.
const MAX_TEXT_CHARS: usize = 4096;
/// At most this many positional refs (`revdiff [base] [against]`).
const MAX_REFS: usize = 2;

/// A checked revdiff command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The arguments to pass, in order, `--output` left out.
    pub args: Vec<String>,
    /// The file name (in the shared temp directory) the launcher reads the annotations from.
    pub output: String,
}

/// Checks `args` (after the program). `shared` is the session's shared temp directory.
pub fn check_args(args: &[String], shared: &Path) -> Result<Invocation, &'static str> {
    let mut out = Vec::new();
    let mut output = None;
    let mut refs = 0;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if FLAGS.contains(&arg.as_str()) {
            out.push(arg.clone());
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        if let Some((_, kind)) = VALUED.iter().find(|(n, _)| *n == name) {
            let value = match inline {
                Some(v) => v,
                None => rest
                    .next()
                    .cloned()
                    .ok_or("revdiff option without its value")?,
            };
            match kind {
                Value::Output => {
                    if output.is_some() {
                        return Err("revdiff --output given twice");
                    }
                    output = Some(shared_child(&value, shared)?);
                }
                kind => {
                    check_value(*kind, &value, shared)?;
                    out.push(format!("{name}={value}"));
                }
            }
            continue;
        }
        if arg.starts_with('-') {
            return Err("revdiff option not allowed through the filter");
        }
        refs += 1;
        if refs > MAX_REFS || !valid_ref(arg) {
            return Err("revdiff ref is not a plain git ref");
        }
        out.push(arg.clone());
    }
    Ok(Invocation {
        args: out,
        output: output.ok_or("revdiff launch without --output in the shared temp directory")?,
    })
}

fn check_value(kind: Value, value: &str, shared: &Path) -> Result<(), &'static str> {
    let ok = match kind {
        Value::Number => {
            (1..=4).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_digit())
        }
        Value::Name => {
            (1..=64).contains(&value.len())
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        }
        Value::Path => project_path(value) || shared_child(value, shared).is_ok(),
        Value::Text => value.chars().count() <= MAX_TEXT_CHARS,
        Value::Output => false,
    };
    if ok {
        Ok(())
    } else {
        Err("revdiff option value not allowed")
    }
}

/// A path inside the project, relative, without `..`: revdiff runs in the project directory.
fn project_path(value: &str) -> bool {
    !value.is_empty()
        && !value.starts_with('-')
        && value.len() <= 4096
        && Path::new(value)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// The name of a file directly in `shared`, given as its absolute path there.
pub(super) fn shared_child(value: &str, shared: &Path) -> Result<String, &'static str> {
    const RULE: &str = "path is not a file directly in the shared temp directory";
    let path = Path::new(value);
    if path.parent() != Some(shared) {
        return Err(RULE);
    }
    let name = path.file_name().and_then(|n| n.to_str()).ok_or(RULE)?;
    let canonical = path
        .components()
        .all(|c| !matches!(c, Component::ParentDir | Component::CurDir))
        && path
            .to_str()
            .is_some_and(|s| !s.ends_with('/') && !s.contains("//"));
    if !canonical
        || name.len() > 255
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(RULE);
    }
    Ok(name.to_owned())
}

/// A ref as revdiff hands it to git: never an option, no whitespace or shell characters.
fn valid_ref(arg: &str) -> bool {
    (1..=256).contains(&arg.len())
        && !arg.starts_with('-')
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._/~^@{}:+-".contains(&b))
}
