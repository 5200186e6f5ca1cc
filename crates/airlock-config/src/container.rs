//! `[sandbox.container]`: the container backend's engine, image and whether containers are kept.
//!
//! Layered key by key (project over global) like `[sandbox.resources]`. The backend itself lives
//! in `airlock-sandbox` (`backend/container/`); this is what the files say.

use serde::{Deserialize, Serialize};

/// The container engine the `container` backend runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineName {
    Podman,
    Docker,
}

impl EngineName {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineName::Podman => "podman",
            EngineName::Docker => "docker",
        }
    }
}

/// The `[sandbox.container]` table as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContainerSection {
    /// `engine = "podman" | "docker"`; default: from `CONTAINER_HOST` / `DOCKER_HOST`, else
    /// podman when installed, else docker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineName>,
    /// A local image to start from instead of airlock's own (built with no registry); it must
    /// exist in the engine's store: airlock never pulls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Keep the container after it exits (named `airlock-<sandbox>-<pid>`); default false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep: Option<bool>,
}

/// The resolved `[sandbox.container]` settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default)]
    pub keep: bool,
}

impl ContainerSettings {
    /// Layers one file's table over these settings.
    pub fn apply(&mut self, s: &ContainerSection) {
        if let Some(engine) = s.engine {
            self.engine = Some(engine);
        }
        if let Some(image) = &s.image {
            self.image = Some(image.clone());
        }
        if let Some(keep) = s.keep {
            self.keep = keep;
        }
    }
}

/// Why an image name is refused, if it is: empty, an option, or a character no engine's
/// reference grammar has (so it can never be read as another argument).
pub fn image_problem(image: &str) -> Option<&'static str> {
    if image.is_empty() {
        return Some("it is empty");
    }
    if image.starts_with('-') {
        return Some("it starts with '-'");
    }
    let ok = image
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-/:@".contains(&b));
    (!ok).then_some("only letters, digits and . _ - / : @ are allowed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_files_win_key_by_key() {
        let mut s = ContainerSettings::default();
        s.apply(&ContainerSection {
            engine: Some(EngineName::Docker),
            image: Some("localhost/a".into()),
            keep: Some(true),
        });
        s.apply(&ContainerSection {
            engine: Some(EngineName::Podman),
            ..Default::default()
        });
        assert_eq!(s.engine, Some(EngineName::Podman));
        assert_eq!(s.image.as_deref(), Some("localhost/a"));
        assert!(s.keep);
    }

    #[test]
    fn image_names_that_could_be_options_or_words_are_refused() {
        assert_eq!(image_problem("localhost/airlock-root:1"), None);
        assert!(image_problem("").is_some());
        assert!(image_problem("--privileged").is_some());
        assert!(image_problem("a b").is_some());
        assert!(image_problem("a,b").is_some());
    }
}
