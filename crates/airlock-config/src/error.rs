//! The one error type of this crate.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong reading airlock's configuration, its paths or its trust store.
///
/// Each message is complete on its own (what failed, the offending file or value, what to do), so the
/// underlying I/O or TOML error is part of the text rather than a separate `source()`: printing the
/// chain with `{:#}` does not repeat it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read {}: {error}; check that it exists and that you can read it", path.display())]
    Read { path: PathBuf, error: io::Error },

    /// A file or directory could not be written.
    #[error(
        "cannot write {}: {error}; check the permissions of its directory and the free space",
        path.display()
    )]
    Write { path: PathBuf, error: io::Error },

    /// A config file is not UTF-8, so it cannot be TOML.
    #[error("{} is not valid UTF-8, so it is not a TOML config file; save it as UTF-8", path.display())]
    NotUtf8 { path: PathBuf },

    /// A config file is not valid TOML, or has an unknown key or a value of the wrong type.
    ///
    /// toml's message carries the line, the column, the offending line and (for an unknown key) the
    /// valid keys.
    #[error(
        "{}: invalid airlock config: {}\nfix the file; every valid key and value is documented, with its default, in the template printed by `airlock config init`",
        path.display(),
        error.to_string().trim_end()
    )]
    Parse {
        path: PathBuf,
        error: Box<toml::de::Error>,
    },

    /// An `env_passthrough` entry that cannot be an environment variable name.
    #[error(
        "{}: env_passthrough entry {value:?} is not a valid environment variable name ({reason}); list bare names such as \"TERM\"",
        path.display()
    )]
    EnvName {
        path: PathBuf,
        value: String,
        reason: &'static str,
    },

    /// A `[[sandbox.mounts]]` path that cannot name a file.
    #[error(
        "{}: [[sandbox.mounts]] path {value:?} is not usable ({reason}); give an absolute path or one starting with `~/`",
        path.display()
    )]
    MountPath {
        path: PathBuf,
        value: String,
        reason: &'static str,
    },

    /// A `[[sandbox.mounts]]` pattern that is not a usable glob.
    #[error(
        "{}: [[sandbox.mounts]] pattern {value:?} is not usable ({reason}); write a glob relative \
         to the project (\"**/*.key\"), under the home (\"~/.config/*/token\") or absolute",
        path.display()
    )]
    MountPattern {
        path: PathBuf,
        value: String,
        reason: String,
    },

    /// A `[[sandbox.mounts]]` entry with both `path` and `pattern`.
    #[error(
        "{}: [[sandbox.mounts]] #{entry} gives both path {mount_path:?} and pattern {pattern:?}; \
         keep one: an entry mounts one host path or each match of one glob",
        path.display()
    )]
    MountPathAndPattern {
        path: PathBuf,
        /// The entry's number in the file, from 1.
        entry: usize,
        mount_path: String,
        pattern: String,
    },

    /// A `[[sandbox.mounts]]` entry with neither `path` nor `pattern`.
    #[error(
        "{}: [[sandbox.mounts]] #{entry} gives neither path nor pattern; add path = \"~/dir\" for \
         one host path or pattern = \"**/*.key\" for each match of a glob",
        path.display()
    )]
    MountNeitherPathNorPattern { path: PathBuf, entry: usize },

    /// A `[sandbox] hide` pattern that is not a usable glob.
    #[error(
        "{}: [sandbox] hide pattern {value:?} is not usable ({reason}); write a name glob such as \"*.pem\" or a project path such as \"/config/master.key\"",
        path.display()
    )]
    HidePattern {
        path: PathBuf,
        value: String,
        reason: String,
    },

    /// A `[sandbox.container] image` that could be read as something else than an image name.
    #[error(
        "{}: [sandbox.container] image = {value:?} is refused ({reason}); name a local image such as \"localhost/my-image:1\", or remove the key for airlock's own",
        path.display()
    )]
    ContainerImage {
        path: PathBuf,
        value: String,
        reason: &'static str,
    },

    /// A `[sandbox.resources]` value that is not of its key's form.
    #[error(
        "{}: [sandbox.resources] {key} = {value} is not valid; expected {expected}",
        path.display()
    )]
    Resource {
        path: PathBuf,
        key: &'static str,
        value: String,
        expected: &'static str,
    },

    /// A rule would be written into a project file that is not trusted at its current content.
    #[error(
        "{} is not trusted (or changed since `airlock trust add`), so airlock does not edit it; \
         review it, then add the rule yourself and run `airlock trust add`",
        file.display()
    )]
    EditUntrusted { file: PathBuf },

    /// A project file whose shape does not take the rule.
    #[error("cannot add the rule to {}: {what}; add it by hand under [network] allow", file.display())]
    EditShape { file: PathBuf, what: &'static str },

    /// `[network] ask_timeout` out of range.
    #[error(
        "{}: [network] ask_timeout = {value} is not valid; expected a number of seconds from 1 to 600",
        path.display()
    )]
    AskTimeout { path: PathBuf, value: u64 },

    /// A `[network.credentials.<name>]` key that is not valid.
    #[error(
        "{}: [network.credentials.{name}] {key}{} is not valid; expected {expected}",
        path.display(),
        if value.is_empty() { String::new() } else { format!(" = {value:?}") }
    )]
    Credential {
        path: PathBuf,
        name: String,
        key: String,
        value: String,
        expected: String,
    },

    /// A `[[network.ports]]` entry without one of its keys.
    #[error(
        "{}: [[network.ports]] #{entry} has no `{key}`; write {form}",
        path.display(),
        form = crate::ports::PORT_FORM
    )]
    PortMissing {
        path: PathBuf,
        /// The entry's number in the file, from 1.
        entry: usize,
        key: &'static str,
    },

    /// A `[[network.ports]]` value that is not of its key's form.
    #[error(
        "{}: [[network.ports]] #{entry}: {key} = {value} is not valid; expected {expected} ({form})",
        path.display(),
        form = crate::ports::PORT_FORM
    )]
    PortValue {
        path: PathBuf,
        entry: usize,
        key: &'static str,
        value: String,
        expected: &'static str,
    },

    /// Two `[[network.ports]]` entries (of one file or two) that cannot both be forwarded.
    #[error("{rule} clashes with {other}: {why}; remove one of them or choose another port")]
    PortClash {
        rule: String,
        other: String,
        why: String,
    },

    /// A host-only section (read by host daemons) in a project file.
    #[error(
        "{}: {section} is a host setting and is honoured only in the global config; move it to \
         ~/.config/airlock/config.toml",
        path.display()
    )]
    HostOnly {
        path: PathBuf,
        section: &'static str,
    },

    /// `HOME` is unset or empty.
    #[error("HOME is not set; set it to your home directory (an absolute path) and try again")]
    HomeMissing,

    /// `HOME` is set to something airlock cannot use.
    #[error(
        "HOME={value:?} {reason}; set HOME to your home directory as an absolute path and try again"
    )]
    HomeInvalid { value: String, reason: &'static str },

    /// The trust store exists but cannot be understood.
    #[error(
        "the trust store {} is corrupt ({reason}); remove it and re-trust your projects with `airlock trust add <dir>`",
        path.display()
    )]
    TrustStoreCorrupt { path: PathBuf, reason: String },

    /// `trust add` on a directory without a `.airlock.toml`.
    #[error(
        "cannot trust {}: {} does not exist; create it first (or check the directory)",
        dir.display(),
        file.display()
    )]
    NoProjectFile { dir: PathBuf, file: PathBuf },

    /// A trust-store directory that is not absolute.
    #[error("cannot trust {}: not an absolute path; pass the project directory as an absolute path", dir.display())]
    RelativeDir { dir: PathBuf },

    /// A trust-store directory that is not UTF-8 (the store is JSON).
    #[error(
        "cannot trust {}: the path is not valid UTF-8 and the trust store is JSON; move the project to a UTF-8 path",
        dir.display()
    )]
    NonUtf8Dir { dir: PathBuf },

    /// A `[sandbox.environment.<NAME>]` whose NAME cannot be an environment variable.
    #[error(
        "{}: {key}: {name:?} is not a valid environment variable name ({reason}); use letters, digits and `_`, not starting with a digit, e.g. [sandbox.environment.GITHUB_TOKEN]",
        path.display()
    )]
    EnvironmentName {
        path: PathBuf,
        key: String,
        name: String,
        reason: &'static str,
    },

    /// A `[sandbox.environment.<NAME>]` without exactly one usable source.
    #[error(
        "{}: {key} {problem}; set exactly one of value = \"text\", env = \"HOST_VARIABLE\" or file = \"path\"",
        path.display()
    )]
    EnvironmentSource {
        path: PathBuf,
        key: String,
        problem: String,
    },

    /// A NAME both set by `[sandbox.environment]` and copied by `env_passthrough`.
    #[error(
        "{key} in {} and env_passthrough = [{name:?}] in {} both set {name}; keep one: the [sandbox.environment] entry sets the value you configure, env_passthrough copies the host's",
        environment.display(),
        passthrough.display()
    )]
    EnvironmentPassthrough {
        name: String,
        key: String,
        environment: PathBuf,
        passthrough: PathBuf,
    },

    /// An `[[include]]` condition that is not `dir:<glob>` with a usable glob.
    #[error(
        "{}: [[include]] if = {value:?} is not usable ({reason}); the one condition is {form}",
        path.display()
    )]
    IncludeCondition {
        path: PathBuf,
        value: String,
        reason: String,
        form: &'static str,
    },

    /// An `[[include]]` path that cannot name a file.
    #[error(
        "{}: [[include]] path = {value:?} is not usable ({reason}); give a file next to this one, a path starting with `~/`, or an absolute path",
        path.display()
    )]
    IncludePath {
        path: PathBuf,
        value: String,
        reason: &'static str,
    },

    /// An `[[include]]` in a project's `.airlock.toml`.
    #[error(
        "{}: [[include]] is honoured only in the global config (~/.config/airlock/config.toml): a project file cannot pull in other files; remove it, or move the entry to the global config",
        path.display()
    )]
    IncludeInProject { path: PathBuf },

    /// A matching `[[include]]` whose file does not exist.
    #[error(
        "{}: [[include]] path = {written:?} (if = {condition:?} matches this project): {} does not exist; create it, or fix or remove the entry",
        global.display(),
        file.display()
    )]
    IncludeMissing {
        global: PathBuf,
        written: String,
        condition: String,
        file: PathBuf,
    },

    /// An included file that has `[[include]]` entries itself.
    #[error(
        "{} (included by {}): [[include]] works one level deep, only in the global config; move these entries to {}",
        file.display(),
        global.display(),
        global.display()
    )]
    IncludeNested { global: PathBuf, file: PathBuf },

    /// An included file where a sandbox can write it (it is not pinned by `airlock trust`).
    #[error(
        "{}: [[include]] file {} is inside {}, which a sandbox can write, so it could change its own config without `airlock trust`; keep included files outside projects and sandbox state, e.g. next to the global config",
        global.display(),
        file.display(),
        tree.display()
    )]
    IncludeWritable {
        global: PathBuf,
        file: PathBuf,
        tree: PathBuf,
    },
}
