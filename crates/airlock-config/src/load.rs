//! Reading config files and layering them into one [`Profile`].

use std::io;
use std::path::{Path, PathBuf};

use crate::trust::{TrustStatus, TrustStore};
use crate::{
    ConfigError, ConfigFile, EgressRule, NetworkSection, PROJECT_FILE_NAME, Profile, ProfileMount,
    SandboxSection, XdgPaths,
};

/// Reads and parses one config file.
pub fn parse_file(path: &Path) -> Result<ConfigFile, ConfigError> {
    let bytes = read(path)?;
    parse_bytes(&bytes, path)
}

/// Parses config text; `origin` is the file it came from, named in every error.
pub fn parse_str(text: &str, origin: &Path) -> Result<ConfigFile, ConfigError> {
    let file: ConfigFile = toml::from_str(text).map_err(|error| ConfigError::Parse {
        path: origin.to_path_buf(),
        error: Box::new(error),
    })?;
    file.validate(origin)?;
    Ok(file)
}

/// Parses the exact bytes that were hashed, so the trusted content and the parsed content are one.
/// Public (hidden) for the fuzz targets; [`parse_file`] is the API.
#[doc(hidden)]
pub fn parse_bytes(bytes: &[u8], origin: &Path) -> Result<ConfigFile, ConfigError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ConfigError::NotUtf8 {
        path: origin.to_path_buf(),
    })?;
    parse_str(text, origin)
}

/// The most a config file or the trust store may hold.
const CONFIG_BYTES: u64 = 1 << 20;

/// Reads a file of the user's (symlinks followed); `Ok(None)` when it does not exist. A FIFO or
/// device is refused without blocking, and the size is capped.
pub(crate) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, ConfigError> {
    optional(
        path,
        crate::hostfs::read_regular_following(path, CONFIG_BYTES),
    )
}

/// Reads a project's `.airlock.toml`, which the sandbox can write: a symlink is not followed.
pub(crate) fn read_optional_project(path: &Path) -> Result<Option<Vec<u8>>, ConfigError> {
    optional(path, crate::hostfs::read_regular(path, CONFIG_BYTES))
}

fn optional(path: &Path, read: io::Result<Vec<u8>>) -> Result<Option<Vec<u8>>, ConfigError> {
    match read {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(ConfigError::Read {
            path: path.to_path_buf(),
            error,
        }),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    })
}

impl ConfigFile {
    /// Checks what the TOML types alone cannot: `env_passthrough` names, and mount entries (one
    /// of `path` and `pattern`, each usable).
    /// [`parse_str`] calls this; call it yourself on a `ConfigFile` built in code.
    pub fn validate(&self, origin: &Path) -> Result<(), ConfigError> {
        if let Some(resources) = &self.sandbox.resources {
            crate::resources::check(origin, resources)?;
        }
        let image = self
            .sandbox
            .container
            .as_ref()
            .and_then(|c| c.image.as_ref());
        if let Some((image, reason)) =
            image.and_then(|i| crate::container::image_problem(i).map(|r| (i, r)))
        {
            return Err(ConfigError::ContainerImage {
                path: origin.to_path_buf(),
                value: image.clone(),
                reason,
            });
        }
        for name in &self.sandbox.env_passthrough {
            if let Some(reason) = env_name_problem(name) {
                return Err(ConfigError::EnvName {
                    path: origin.to_path_buf(),
                    value: name.clone(),
                    reason,
                });
            }
        }
        for pattern in &self.sandbox.hide {
            if let Some(reason) = hide_pattern_problem(pattern) {
                return Err(ConfigError::HidePattern {
                    path: origin.to_path_buf(),
                    value: pattern.clone(),
                    reason,
                });
            }
        }
        crate::mounts::check(origin, &self.sandbox.mounts)?;
        crate::credentials::validate(origin, &self.network.credentials)?;
        if let Some(secs) = self.network.ask_timeout
            && !(1..=600).contains(&secs)
        {
            return Err(ConfigError::AskTimeout {
                path: origin.to_path_buf(),
                value: secs,
            });
        }
        crate::ports::check(origin, &self.network.ports)?;
        crate::environment::validate(self, origin)?;
        crate::include::validate(self, origin)?;
        Ok(())
    }
}

/// Why `pattern` cannot be a `[sandbox] hide` glob, if it cannot.
pub fn hide_pattern_problem(pattern: &str) -> Option<String> {
    let body = pattern.strip_prefix('/').unwrap_or(pattern);
    if body.is_empty() {
        return Some("it names no file".into());
    }
    if pattern.contains('\0') {
        return Some("it contains a NUL byte".into());
    }
    if body
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Some("a path part is empty, `.` or `..`".into());
    }
    glob::Pattern::new(body).err().map(|e| e.msg.to_owned())
}

/// Why `name` cannot be passed to `setenv`, if it cannot.
fn env_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.contains('=') {
        Some("it contains `=`")
    } else if name.contains('\0') {
        Some("it contains a NUL byte")
    } else {
        None
    }
}

impl Profile {
    /// Layers the defaults, then the global file, then the project file.
    ///
    /// Scalars: the later file wins when it sets the key. `env_passthrough` and `hide`: the union, in order,
    /// without duplicates. `mounts`: global then project, each tagged with its file; overlaps are
    /// resolved by the sandbox spec builder, not here. `[network]`: `preset` and `allow_private` are
    /// scalars; `allow` and `deny` append (each rule tagged with its file); `resolve` maps merge, the
    /// project's entry winning for a name both files map. `[overlay] default` is a scalar;
    /// `[tools.<name>]` tables layer key by key (a key the project sets wins, the others stay).
    /// `[sandbox.environment]` layers per NAME: the later file's entry replaces the whole entry.
    pub fn layer(
        global: Option<(&Path, &ConfigFile)>,
        project: Option<(&Path, &ConfigFile)>,
    ) -> Profile {
        Profile::layer_all(global, &[], project)
    }

    /// [`Profile::layer`] with the global file's matching `[[include]]` files between the global
    /// and the project file, in order; they layer like any file (`[bridge]` comes from the global
    /// file alone).
    pub fn layer_all(
        global: Option<(&Path, &ConfigFile)>,
        includes: &[(&Path, &ConfigFile)],
        project: Option<(&Path, &ConfigFile)>,
    ) -> Profile {
        let mut profile = Profile::default();
        // Host commands run on the host: only the global file may name them (`load` refuses a
        // project file's `[bridge]`).
        if let Some((_, file)) = global {
            profile.bridge_commands = file.bridge.commands.keys().cloned().collect();
            profile.bridge_credential_hosts = file.bridge.credential_hosts.clone();
        }
        let layers = global.into_iter().chain(includes.iter().copied());
        for (origin, file) in layers.chain(project) {
            profile.apply(origin, &file.sandbox);
            profile.apply_network(origin, &file.network);
            crate::credentials::layer(&mut profile.credentials, origin, &file.network.credentials);
            if let Some(default) = file.overlay.default {
                profile.overlay_default = default;
            }
            crate::tools_section::layer_tools(&mut profile.tools, origin, &file.tools);
        }
        profile
    }

    fn apply(&mut self, origin: &Path, s: &SandboxSection) {
        if let Some(backend) = s.backend {
            self.backend = Some(backend);
        }
        if let Some(network) = s.network {
            self.network = network;
        }
        if let Some(hide) = s.hide_env_files {
            self.hide_env_files = hide;
        }
        if let Some(nested) = s.nested_namespaces {
            self.nested_namespaces = nested;
        }
        if let Some(bridge) = s.bridge {
            self.bridge = bridge;
        }
        if let Some(resources) = &s.resources {
            self.resources.apply(resources);
        }
        if let Some(container) = &s.container {
            self.container.apply(container);
        }
        for pattern in &s.hide {
            if !self.hide.contains(pattern) {
                self.hide.push(pattern.clone());
            }
        }
        crate::environment::layer(&mut self.environment, origin, &s.environment);
        for name in &s.env_passthrough {
            if !self.env_passthrough.contains(name) {
                self.env_passthrough.push(name.clone());
            }
        }
        // Numbered before any entry is skipped, so `#n` is the entry's place in its file.
        let numbered = s.mounts.iter().enumerate();
        self.mounts.extend(numbered.filter_map(|(n, m)| {
            Some(ProfileMount {
                selector: m.selector()?,
                mode: m.mode,
                origin: origin.to_path_buf(),
                entry: n + 1,
            })
        }));
    }
}

impl Profile {
    fn apply_network(&mut self, origin: &Path, n: &NetworkSection) {
        let e = &mut self.egress;
        if let Some(preset) = n.preset {
            e.preset = preset;
        }
        if let Some(allow_private) = n.allow_private {
            e.allow_private = allow_private;
        }
        let tag = |rule: &String| EgressRule {
            rule: rule.clone(),
            origin: origin.to_path_buf(),
        };
        e.allow.extend(n.allow.iter().map(tag));
        e.deny.extend(n.deny.iter().map(tag));
        e.resolve
            .extend(n.resolve.iter().map(|(name, ip)| (name.clone(), *ip)));
        if let Some(url) = &n.upstream_proxy {
            e.upstream_proxy = Some(url.clone());
        }
        if let Some(unmatched) = n.unmatched {
            e.unmatched = unmatched;
        }
        if let Some(secs) = n.ask_timeout {
            e.ask_timeout = secs;
        }
        if let Some(on) = n.ask_notify {
            e.ask_notify = on;
        }
        crate::ports::layer(&mut self.ports, origin, &n.ports);
    }
}

/// What happened to a project's `.airlock.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectFile {
    /// The project has none.
    Absent,
    /// Pinned in the trust store at its current hash: loaded.
    Trusted(PathBuf),
    /// Not in the trust store: ignored.
    Untrusted(PathBuf),
    /// In the trust store with another hash: ignored until re-trusted.
    Changed(PathBuf),
}

/// The resolved profile and which files it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedConfig {
    pub profile: Profile,
    /// The global file, if it exists.
    pub global: Option<PathBuf>,
    /// The global file's `[[include]]` files that matched the project, in the order loaded.
    pub includes: Vec<PathBuf>,
    pub project: ProjectFile,
}

impl LoadedConfig {
    /// One line per thing the user should know about, e.g. an ignored project file.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = self.project_warnings();
        warnings.extend(crate::environment::missing_host_variables(
            &self.profile,
            |name| std::env::var(name).is_ok(),
        ));
        warnings
    }

    fn project_warnings(&self) -> Vec<String> {
        match &self.project {
            ProjectFile::Absent | ProjectFile::Trusted(_) => Vec::new(),
            ProjectFile::Untrusted(path) => vec![format!(
                "{} is not trusted and was ignored; review it, then run `airlock trust add {}`",
                path.display(),
                project_dir(path).display()
            )],
            ProjectFile::Changed(path) => vec![format!(
                "{} changed since it was trusted and was ignored; review it, then run `airlock trust add {}` again",
                path.display(),
                project_dir(path).display()
            )],
        }
    }
}

fn project_dir(file: &Path) -> &Path {
    file.parent().unwrap_or(file)
}

/// Loads the global config (missing = defaults) and the project's `.airlock.toml`, the latter only
/// when the trust store pins `project_root` to the file's current sha256. `project_root` is looked up
/// in the trust store as given, so pass it canonicalised, as `airlock trust add` stores it.
///
/// The file is read once and that same buffer is hashed and parsed, so a file swapped between the
/// check and the parse cannot slip through.
///
/// The global file's `[[include]]` entries whose `dir:` glob matches `project_root` are loaded
/// between the two, in order. A NAME set in `[sandbox.environment]` by one file and listed in
/// `env_passthrough` by another is an error naming both.
pub fn load(paths: &XdgPaths, project_root: &Path) -> Result<LoadedConfig, ConfigError> {
    load_layers(paths, project_root, true)
}

/// [`load`] without the project's `.airlock.toml`: the global file and its matching `[[include]]`
/// files only, for a directory whose contents a sandbox writes with no one reviewing them (an
/// `airlock scratchpad`). The project file is never read, trusted or not; `project` is `Absent`.
pub fn load_global(paths: &XdgPaths, project_root: &Path) -> Result<LoadedConfig, ConfigError> {
    load_layers(paths, project_root, false)
}

fn load_layers(
    paths: &XdgPaths,
    project_root: &Path,
    read_project_file: bool,
) -> Result<LoadedConfig, ConfigError> {
    let global_path = paths.config_file();
    let global_cfg = match read_optional(&global_path)? {
        Some(bytes) => Some(parse_bytes(&bytes, &global_path)?),
        None => None,
    };

    let project_path = project_root.join(PROJECT_FILE_NAME);
    let mut project_cfg = None;
    let bytes = match read_project_file {
        true => read_optional_project(&project_path)?,
        false => None,
    };
    let project = match bytes {
        None => ProjectFile::Absent,
        Some(bytes) => match TrustStore::load(&paths.trust_file())?.status(project_root, &bytes) {
            TrustStatus::Trusted => {
                let cfg = parse_bytes(&bytes, &project_path)?;
                check_project_file(&cfg, &project_path)?;
                project_cfg = Some(cfg);
                ProjectFile::Trusted(project_path.clone())
            }
            TrustStatus::Untrusted => ProjectFile::Untrusted(project_path.clone()),
            TrustStatus::Changed => ProjectFile::Changed(project_path.clone()),
        },
    };

    let included = match &global_cfg {
        Some(global) => crate::include::load_matching(paths, &global_path, global, project_root)?,
        None => Vec::new(),
    };
    let global = global_cfg.as_ref().map(|c| (global_path.as_path(), c));
    let includes: Vec<(&Path, &ConfigFile)> =
        included.iter().map(|(p, c)| (p.as_path(), c)).collect();
    let project_layer = project_cfg.as_ref().map(|c| (project_path.as_path(), c));
    let layers: Vec<(&Path, &ConfigFile)> = global
        .into_iter()
        .chain(includes.iter().copied())
        .chain(project_layer)
        .collect();
    crate::environment::check_passthrough(&layers)?;
    let profile = Profile::layer_all(global, &includes, project_layer);
    crate::credentials::check_overlaps(&profile.credentials)?;
    crate::ports::check_layers(&profile.ports)?;
    Ok(LoadedConfig {
        profile,
        global: global_cfg.map(|_| global_path),
        includes: included.into_iter().map(|(p, _)| p).collect(),
        project,
    })
}

/// What a project file may not hold although the global file may: `[bridge]` (host commands run
/// on the host), `[network.credentials]` (host secrets) and `[[include]]` (other files would
/// bypass `airlock trust`).
pub(crate) fn check_project_file(cfg: &ConfigFile, path: &Path) -> Result<(), ConfigError> {
    if !cfg.bridge.is_empty() {
        return Err(ConfigError::HostOnly {
            path: path.to_path_buf(),
            section: "[bridge]",
        });
    }
    // A credential rule sends a host secret (a file, a command's output) to the hosts it names.
    if !cfg.network.credentials.is_empty() {
        return Err(ConfigError::HostOnly {
            path: path.to_path_buf(),
            section: "[network.credentials]",
        });
    }
    if !cfg.include.is_empty() {
        return Err(ConfigError::IncludeInProject {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
