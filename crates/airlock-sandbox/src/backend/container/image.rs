//! airlock's own image: an empty root holding the spec's root symlinks, imported from a tar
//! airlock writes (no registry, no base image, nothing to download). The spec's binds bring
//! the host's system read-only, as they do for native, so the image needs nothing else.
//!
//! Tagged by a hash of the symlinks, so a host whose layout changes gets a new image and a
//! second launch reuses the first's.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use super::engine::{Engine, EngineName};

/// The repository airlock's own images are tagged in.
pub const REPOSITORY: &str = "localhost/airlock-root";

/// The tag of airlock's image for these symlinks.
pub fn own_tag(symlinks: &[(PathBuf, PathBuf)]) -> String {
    let mut h = Sha256::new();
    for (target, link) in symlinks {
        h.update(target.as_os_str().as_encoded_bytes());
        h.update([0]);
        h.update(link.as_os_str().as_encoded_bytes());
        h.update([0]);
    }
    let hex: String = h.finalize()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{REPOSITORY}:{hex}")
}

/// A tar of the root: each symlink's parent directories, then the symlink (ustar).
pub fn root_tar(symlinks: &[(PathBuf, PathBuf)]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (target, link) in symlinks {
        let rel = target
            .strip_prefix("/")
            .map_err(|_| format!("{} is not absolute", target.display()))?;
        for dir in rel
            .ancestors()
            .skip(1)
            .filter(|d| !d.as_os_str().is_empty())
        {
            if !dirs.iter().any(|d| d == dir) {
                dirs.push(dir.to_path_buf());
            }
        }
        let _ = link;
    }
    dirs.sort_by_key(|d| d.components().count());
    for dir in &dirs {
        out.extend(header(&format!("{}/", dir.display()), b'5', "", 0o755)?);
    }
    for (target, link) in symlinks {
        let rel = target.strip_prefix("/").expect("checked above");
        out.extend(header(
            &rel.display().to_string(),
            b'2',
            &link.display().to_string(),
            0o777,
        )?);
    }
    out.extend([0u8; 1024]);
    Ok(out)
}

/// One ustar header block (no data follows a directory or a symlink).
fn header(name: &str, kind: u8, link: &str, mode: u32) -> Result<[u8; 512], String> {
    if name.len() > 99 || link.len() > 99 {
        return Err(format!("{name} -> {link} is too long for airlock's image"));
    }
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    let octal = |h: &mut [u8; 512], at: usize, len: usize, v: u64| {
        let s = format!("{v:0width$o}", width = len - 1);
        h[at..at + len - 1].copy_from_slice(s.as_bytes());
    };
    octal(&mut h, 100, 8, u64::from(mode));
    octal(&mut h, 108, 8, 0);
    octal(&mut h, 116, 8, 0);
    octal(&mut h, 124, 12, 0);
    octal(&mut h, 136, 12, 0);
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    let s = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(s.as_bytes());
    Ok(h)
}

/// An engine command with its rebuilt environment, started in `/`, with the options that
/// point it at its socket.
pub fn command(engine: &Engine) -> Command {
    let mut cmd = bare_command(engine);
    cmd.args(engine.global_args());
    cmd
}

/// [`command`] without the socket options (for an argv that has them: `render`'s).
pub fn bare_command(engine: &Engine) -> Command {
    let mut cmd = Command::new(&engine.program);
    cmd.env_clear()
        .envs(engine.environment(&|n| std::env::var_os(n)))
        .current_dir("/");
    cmd
}

/// Whether the engine's store has `image`.
pub fn exists(engine: &Engine, image: &str) -> Result<bool, String> {
    let mut cmd = command(engine);
    match engine.name {
        EngineName::Podman => cmd.args(["image", "exists", image]),
        EngineName::Docker => cmd.args(["image", "inspect", "--format", "{{.Id}}", image]),
    };
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", engine.program.display()))?;
    match out.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(format!(
            "{} cannot reach its engine: {}; start it (podman: systemctl --user start \
             podman.socket; docker: the daemon) or use --backend native",
            engine.program.display(),
            airlock_config::printable(String::from_utf8_lossy(&out.stderr).trim())
        )),
    }
}

/// Imports airlock's image for `symlinks` as `tag` unless the store has it.
pub fn ensure_own(
    engine: &Engine,
    tag: &str,
    symlinks: &[(PathBuf, PathBuf)],
) -> Result<(), String> {
    if exists(engine, tag)? {
        return Ok(());
    }
    let tar = root_tar(symlinks)?;
    let mut child = command(engine)
        .args(["import", "-", tag])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", engine.program.display()))?;
    let written = child.stdin.take().map(|mut s| s.write_all(&tar));
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() || !matches!(written, Some(Ok(()))) {
        return Err(format!(
            "{} import of airlock's image {tag} failed: {}",
            engine.program.display(),
            airlock_config::printable(String::from_utf8_lossy(&out.stderr).trim())
        ));
    }
    Ok(())
}

/// The image's name: the configured one, else airlock's own tag for `symlinks`.
pub fn name(configured: Option<&str>, symlinks: &[(PathBuf, PathBuf)]) -> String {
    configured.map_or_else(|| own_tag(symlinks), str::to_owned)
}

/// Makes sure the store has the image a launch runs: a configured one must be there already
/// (airlock never pulls), airlock's own is imported when missing.
pub fn ensure(
    engine: &Engine,
    configured: bool,
    image: &str,
    symlinks: &[(PathBuf, PathBuf)],
) -> Result<(), String> {
    if !configured {
        return ensure_own(engine, image, symlinks);
    }
    if exists(engine, image)? {
        return Ok(());
    }
    Err(format!(
        "the image {image:?} ([sandbox.container] image) is not in {}'s store, and airlock \
         never pulls; build or load it there ({} build / load), or remove the key for airlock's \
         own image",
        engine.name.as_str(),
        engine.name.as_str()
    ))
}

/// A record that the engine's store had an image: an empty file at
/// `<state_root>/container-images/<key>`, the key a hash of the image's name and of everything
/// that selects the store (the engine's program, endpoint, user mode and environment). A launch
/// that finds it does not ask the engine (a whole engine process, ~40–55 ms here); one whose
/// engine then fails before the container runs asks again (`launch.rs`), so an image removed
/// since is imported again, or named. The state root is host-only: a sandbox cannot plant one.
pub struct Seen {
    path: PathBuf,
}

impl Seen {
    pub fn new(state_root: &std::path::Path, engine: &Engine, image: &str) -> Seen {
        let mut parts: Vec<u8> = Vec::new();
        let mut part = |b: &[u8]| {
            parts.extend_from_slice(b);
            parts.push(0);
        };
        part(image.as_bytes());
        part(engine.name.as_str().as_bytes());
        part(engine.program.as_os_str().as_encoded_bytes());
        part(format!("{:?} {}", engine.endpoint, engine.rootless).as_bytes());
        for (k, v) in engine.environment(&|n| std::env::var_os(n)) {
            part(k.as_bytes());
            part(v.as_encoded_bytes());
        }
        let key = &airlock_config::sha256_hex(&parts)[..24];
        Seen {
            path: state_root.join("container-images").join(key),
        }
    }

    /// Whether the record is there (a plain file; a link or anything else is not a record).
    pub fn holds(&self) -> bool {
        std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.file_type().is_file())
    }

    /// Records the image as seen; best effort (without the record the next launch asks again).
    pub fn record(&self) {
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir);
        }
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path);
    }

    pub fn forget(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_tar_holds_the_parents_then_the_links() {
        let links = vec![
            (PathBuf::from("/bin"), PathBuf::from("usr/bin")),
            (PathBuf::from("/usr/local/x"), PathBuf::from("../y")),
        ];
        let tar = root_tar(&links).unwrap();
        assert_eq!(tar.len(), 512 * 4 + 1024);
        let name = |i: usize| {
            let h = &tar[i * 512..i * 512 + 100];
            String::from_utf8_lossy(&h[..h.iter().position(|&b| b == 0).unwrap()]).into_owned()
        };
        assert_eq!(
            [name(0), name(1), name(2), name(3)],
            ["usr/", "usr/local/", "bin", "usr/local/x"]
        );
        assert_eq!(tar[3 * 512 + 156], b'2');
        assert_eq!(&tar[3 * 512 + 157..3 * 512 + 161], b"../y");
        assert_eq!(own_tag(&links), own_tag(&links));
        assert_ne!(own_tag(&links), own_tag(&links[..1]));
        assert!(own_tag(&links).starts_with("localhost/airlock-root:"));
    }

    fn engine(name: EngineName, endpoint: &str) -> Engine {
        Engine {
            name,
            program: PathBuf::from("/usr/bin/podman"),
            endpoint: super::super::engine::Endpoint::parse(Some(endpoint)),
            rootless: true,
        }
    }

    #[test]
    fn a_record_is_per_image_and_per_store_and_only_a_plain_file() {
        let dir = tempfile::tempdir().unwrap();
        let local = engine(EngineName::Podman, "unix:///run/a.sock");
        let seen = Seen::new(dir.path(), &local, "localhost/airlock-root:1");
        assert!(!seen.holds());
        seen.record();
        assert!(seen.holds());
        assert!(!Seen::new(dir.path(), &local, "localhost/airlock-root:2").holds());
        let other = engine(EngineName::Podman, "unix:///run/b.sock");
        assert!(!Seen::new(dir.path(), &other, "localhost/airlock-root:1").holds());
        seen.forget();
        assert!(!seen.holds());
        // A link where the record goes is not one, and recording does not write through it.
        let elsewhere = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, &seen.path).unwrap();
        assert!(!seen.holds());
        seen.record();
        assert!(!elsewhere.exists() && !seen.holds());
    }
}
