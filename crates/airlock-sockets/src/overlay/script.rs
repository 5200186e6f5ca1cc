//! The script airlock writes for one overlay launch, and where it keeps it.
//!
//! The launch the sandbox asked for is never run as it was sent. Its checked parts (revdiff's
//! arguments, the names of the output and sentinel files) go into a script airlock writes in a
//! host-only directory (0700, the script 0500, never mounted into a sandbox), and kitty or herdr
//! is told to run `/bin/sh <that script>`. Validation and execution so use the same bytes, and
//! the script pins everything a host program would otherwise take from a place the sandbox
//! can write:
//!
//! - `cd` to the project itself (a subdirectory could hold a `.git` the sandbox planted);
//! - `PATH` holding only a link to the host's own git (revdiff also runs `hg` and `jj`, whose
//!   repository configs, which the sandbox can write in the project, run commands);
//! - `GIT_DIR` the project's `.git` as vetted at launch (or a path that does not exist), so a
//!   `.git` the sandbox creates later is never read;
//! - revdiff's `--output` a file of the host-only directory; `airlock overlay-handoff` copies it
//!   into the shared temp directory afterwards without following links (the sandbox can make
//!   any name there a symlink to a host file, and revdiff would write through it).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::words::quote;

/// Everything a launch script pins, fixed at launch on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pins {
    /// revdiff's resolved absolute path.
    pub revdiff: PathBuf,
    /// airlock's own binary (runs `overlay-handoff`).
    pub airlock: PathBuf,
    /// The host's git, resolved outside every sandbox-writable directory; `None`: no git.
    pub git: Option<PathBuf>,
    /// The project directory.
    pub project: PathBuf,
    /// The project's `.git` directory as it was at launch; `None`: it had none.
    pub git_dir: Option<PathBuf>,
    /// The session's shared temp directory (same path on both sides).
    pub shared: PathBuf,
    /// `EDITOR` / `VISUAL` as the host has them, resolved to absolute paths.
    pub editor_env: Vec<(String, String)>,
}

/// The host-only directory of one session's launch scripts, removed when dropped.
#[derive(Debug)]
pub struct ScriptDir {
    dir: PathBuf,
    next: AtomicU64,
}

impl ScriptDir {
    /// Creates `dir` (0700, its parents too), replacing what an earlier session left there.
    pub fn create(dir: &Path) -> io::Result<ScriptDir> {
        if let Some(parent) = dir.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
        }
        match fs::symlink_metadata(dir) {
            Ok(_) => fs::remove_dir_all(dir)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        fs::DirBuilder::new().mode(0o700).create(dir)?;
        fs::DirBuilder::new().mode(0o700).create(dir.join("bin"))?;
        Ok(ScriptDir {
            dir: dir.to_path_buf(),
            next: AtomicU64::new(1),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Links `bin/git` to the host's git (the only program on the script's `PATH`).
    pub fn link_git(&self, git: &Path) -> io::Result<()> {
        std::os::unix::fs::symlink(git, self.dir.join("bin/git"))
    }

    /// Writes the script for one launch (0500); returns its path.
    pub fn write(
        &self,
        pins: &Pins,
        args: &[String],
        output: &str,
        sentinel: Option<&str>,
    ) -> Result<PathBuf, &'static str> {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let path = self.dir.join(format!("launch-{n}"));
        let private_output = self.dir.join(format!("output-{n}"));
        let text = render(pins, &self.dir, args, &private_output, output, sentinel);
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .open(&path)
            .and_then(|mut f| {
                f.write_all(text.as_bytes())?;
                f.set_permissions(fs::Permissions::from_mode(0o500))
            });
        written.map_err(|_| "the launch script could not be written")?;
        Ok(path)
    }
}

impl Drop for ScriptDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn text(path: &Path) -> String {
    quote(&path.to_string_lossy())
}

/// The script's text. Every word is single-quoted: no byte of it is shell syntax.
fn render(
    pins: &Pins,
    dir: &Path,
    args: &[String],
    private_output: &Path,
    output: &str,
    sentinel: Option<&str>,
) -> String {
    let git_dir = pins
        .git_dir
        .clone()
        .unwrap_or_else(|| dir.join("no-git-repository"));
    let mut env = vec![
        format!("PATH={}", text(&dir.join("bin"))),
        format!("GIT_DIR={}", text(&git_dir)),
        format!("GIT_WORK_TREE={}", text(&pins.project)),
    ];
    for (name, value) in &pins.editor_env {
        env.push(format!("{name}={}", quote(value)));
    }
    let mut revdiff = vec![
        text(&pins.revdiff),
        quote(&format!("--output={}", private_output.display())),
    ];
    revdiff.extend(args.iter().map(|a| quote(a)));
    let mut handoff = vec![
        text(&pins.airlock),
        quote("overlay-handoff"),
        text(private_output),
        text(&pins.shared),
        quote(output),
    ];
    if let Some(sentinel) = sentinel {
        handoff.push(quote(sentinel));
    }
    format!(
        "#!/bin/sh\n# written by airlock for one overlay launch; runs on the host\ncd {} && {} {}\nexec {}\n",
        text(&pins.project),
        env.join(" "),
        revdiff.join(" "),
        handoff.join(" "),
    )
}
