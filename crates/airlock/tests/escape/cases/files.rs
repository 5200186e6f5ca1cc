//! Filesystem cases: secrets in the host home, `.env` masking, writes outside the project,
//! symlinks planted in the project, and the project itself as the control.

use std::fs;
use std::os::unix::fs::{MetadataExt as _, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::check;
use crate::harness::{Leftovers, Mode, Net, Outcome, Secrets, World, fail, skip};

/// A path as the `&str` the probe takes (the suite's temp paths are always UTF-8).
pub fn s(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

/// Control: the planted project file reads back, so the sandbox starts and the project is there.
pub fn control_read_planted(w: &mut World) -> Outcome {
    let planted = w.project.join("planted.txt");
    let p = w.probe(Net::Host, &["read", s(&planted)])?;
    p.succeeded()?;
    check!(
        p.stdout_has(&Secrets::planted(w)),
        "control: the planted project file read back wrong:\n      {}",
        p.run.describe()
    );
    Ok(())
}

/// Control: a write in the project from inside shows up on the host, owned by the caller's uid.
pub fn control_project_write(w: &mut World) -> Outcome {
    let out = w.project.join(format!("written-{}", w.token));
    w.probe(Net::Host, &["write", s(&out)])?.succeeded()?;
    let contents = fs::read_to_string(&out).map_err(|e| {
        fail(format!(
            "control: the project write is not visible on the host at {}: {e}",
            out.display()
        ))
    })?;
    check!(
        contents == "airlock-escape\n",
        "control: {} holds {contents:?}",
        out.display()
    );
    let owner = fs::metadata(&out)?.uid();
    check!(
        owner == w.mode.uid,
        "control: {} is owned by uid {owner} on the host, expected {} (the caller)",
        out.display(),
        w.mode.uid
    );
    Ok(())
}

/// The file must still hold exactly `expected` on the host.
fn unchanged(path: &Path, expected: &str) -> Outcome {
    let now = fs::read_to_string(path).unwrap_or_else(|e| format!("<unreadable: {e}>"));
    check!(
        now == expected,
        "ESCAPE: host file {} was changed from inside: now {now:?}",
        path.display()
    );
    Ok(())
}

/// The path must not exist on the host; removes it (the suite's own leftovers) if it does.
fn absent_on_host(path: &Path) -> Outcome {
    if fs::symlink_metadata(path).is_ok() {
        let _ = fs::remove_file(path);
        return Err(fail(format!(
            "ESCAPE: {} appeared on the host after a write from inside",
            path.display()
        )));
    }
    Ok(())
}

fn read_absent(w: &mut World, path: &Path, secret: &str) -> Outcome {
    let p = w.probe(Net::Host, &["read", s(path)])?;
    p.leaks_nothing(secret)?;
    p.denied(&["ENOENT"])
}

pub fn ssh_key_absent(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let secret = Secrets::ssh(&w);
    let key = w.home.join(".ssh/id_ed25519");
    read_absent(&mut w, &key, &secret)?;
    let dir = w.home.join(".ssh");
    w.probe(Net::Host, &["stat", s(&dir)])?
        .denied(&["ENOENT"])?;
    control_read_planted(&mut w)
}

pub fn aws_credentials_absent(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let secret = Secrets::aws(&w);
    let credentials = w.home.join(".aws/credentials");
    read_absent(&mut w, &credentials, &secret)?;
    control_read_planted(&mut w)
}

pub fn other_credentials_absent(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let secret = format!("CREDENTIAL-{}", w.token);
    for rel in World::other_credentials() {
        let path = w.home.join(rel);
        read_absent(&mut w, &path, &secret)?;
    }
    control_read_planted(&mut w)
}

/// Secret files under /etc (password hashes, sudo rules, host keys) are not among the /etc
/// entries the sandbox gets.
pub fn etc_secrets_absent(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let secrets = [
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/sudoers",
        "/etc/ssh/ssh_host_ed25519_key",
        "/etc/ssh/ssh_host_rsa_key",
        "/etc/ssh/ssh_host_ecdsa_key",
    ];
    for path in secrets.iter().filter(|p| Path::new(p).exists()) {
        w.probe(Net::Host, &["read", path])?.denied(&["ENOENT"])?;
    }
    w.probe(Net::Host, &["read", "/etc/passwd"])?.succeeded()
}

/// Other homes (root's, everyone's under /home) are absent; only the synthetic one exists.
pub fn host_homes_absent(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    for path in ["/root", "/home"] {
        w.probe(Net::Host, &["stat", path])?.denied(&["ENOENT"])?;
    }
    let home = w.home.clone();
    w.probe(Net::Host, &["stat", s(&home)])?.succeeded()?;
    control_read_planted(&mut w)
}

pub fn env_files_read_empty(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let secret = Secrets::env(&w);
    for env in [
        w.project.join(".env"),
        w.project.join("config/.env.production"),
    ] {
        let p = w.probe(Net::Host, &["read", s(&env)])?;
        p.leaks_nothing(&secret)?;
        p.succeeded()?;
        check!(
            p.stdout_has(": 0 bytes"),
            "{} must read as empty inside:\n      {}",
            env.display(),
            p.run.describe()
        );
    }
    control_read_planted(&mut w)
}

pub fn env_files_not_writable(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let secret = Secrets::env(&w);
    let env = w.project.join(".env");
    let replacement = w.project.join("replacement.txt");
    w.put(&replacement, "REPLACED\n")?;
    w.give_to_user()?;
    w.probe(Net::Host, &["open-write", s(&env)])?.denied(&[])?;
    w.probe(Net::Host, &["write", s(&env)])?.denied(&[])?;
    w.probe(Net::Host, &["unlink", s(&env)])?.denied(&[])?;
    w.probe(Net::Host, &["rename", s(&replacement), s(&env)])?
        .denied(&[])?;
    let nested = w.project.join("config/.env.production");
    w.probe(Net::Host, &["write", s(&nested)])?.denied(&[])?;
    unchanged(&env, &secret)?;
    unchanged(&nested, &secret)?;
    control_project_write(&mut w)
}

/// A `.env` that is a symlink to a host secret: masking must not follow it to a host path, the
/// launch must still work, and nothing of the secret may come out.
pub fn env_symlink_to_host_secret(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let env = w.project.join(".env");
    let nested = w.project.join("config/.env.production");
    fs::remove_file(&env)?;
    fs::remove_file(&nested)?;
    symlink(w.home.join(".ssh/id_ed25519"), &env)?;
    symlink("../../sibling/secret", &nested)?;
    w.give_to_user()?;
    let (ssh, sibling) = (Secrets::ssh(&w), Secrets::sibling(&w));
    w.probe(Net::Host, &["read", s(&env)])?
        .leaks_nothing(&ssh)?;
    w.probe(Net::Host, &["read", s(&nested)])?
        .leaks_nothing(&sibling)?;
    control_read_planted(&mut w)?;
    unchanged(&w.home.join(".ssh/id_ed25519"), &ssh)?;
    unchanged(&w.sibling.join("secret"), &sibling)
}

/// Names in the top level of `dir`.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Writes aimed at the host's home path land in the synthetic home (or are refused), never in
/// the real one; the only new entries the host home may get are airlock's own XDG state dirs.
pub fn write_host_home(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let before = entries(&w.home);
    let ssh = Secrets::ssh(&w);
    let targets = [
        w.home.join("airlock-escape-pwned"),
        w.home.join(".ssh/authorized_keys"),
        w.home.join(".bashrc"),
    ];
    for target in &targets {
        w.probe(Net::Host, &["write-p", s(target)])?;
    }
    let key = w.home.join(".ssh/id_ed25519");
    w.probe(Net::Host, &["write-p", s(&key)])?;
    for target in &targets {
        absent_on_host(target)?;
    }
    unchanged(&key, &ssh)?;
    let allowed = [".local", ".config", ".cache"];
    let new: Vec<String> = entries(&w.home)
        .into_iter()
        .filter(|e| !before.contains(e) && !allowed.contains(&e.as_str()))
        .collect();
    check!(
        new.is_empty(),
        "ESCAPE: new entries in the host home: {new:?}"
    );
    control_project_write(&mut w)
}

pub fn write_usr(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let created = [
        PathBuf::from(format!("/usr/airlock-escape-{}", w.token)),
        PathBuf::from(format!("/usr/bin/airlock-escape-{}", w.token)),
    ];
    let _cleanup = Leftovers(created.to_vec());
    for target in &created {
        w.probe(Net::Host, &["write", s(target)])?.denied(&[])?;
    }
    w.probe(Net::Host, &["open-write", "/usr/bin/env"])?
        .denied(&[])?;
    for target in &created {
        absent_on_host(target)?;
    }
    control_project_write(&mut w)
}

pub fn write_etc(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let passwd = fs::read_to_string("/etc/passwd")?;
    let created = PathBuf::from(format!("/etc/airlock-escape-{}", w.token));
    let _cleanup = Leftovers(vec![created.clone()]);
    w.probe(Net::Host, &["write", s(&created)])?.denied(&[])?;
    for existing in ["/etc/passwd", "/etc/hosts", "/etc/resolv.conf"] {
        if Path::new(existing).exists() {
            w.probe(Net::Host, &["open-write", existing])?.denied(&[])?;
        }
    }
    absent_on_host(&created)?;
    unchanged(Path::new("/etc/passwd"), &passwd)?;
    control_project_write(&mut w)
}

/// The system files of /etc the sandbox gets are fixed: none of them can be written, chmodded,
/// chowned, renamed or removed, and each reads as the host's file does.
/// Control: the same operations on a file the sandbox wrote in the project succeed.
pub fn etc_files_fixed(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let files: Vec<&str> = ["/etc/passwd", "/etc/group", "/etc/ld.so.cache"]
        .into_iter()
        .filter(|f| Path::new(f).is_file())
        .collect();
    if files.is_empty() {
        return Err(skip(
            "this host has none of /etc/passwd, /etc/group, /etc/ld.so.cache",
        ));
    }
    let before: Vec<Vec<u8>> = files.iter().map(fs::read).collect::<Result<_, _>>()?;
    for file in &files {
        for attempt in ["open-write", "chmod-same", "chown-same", "unlink"] {
            w.probe(Net::Host, &[attempt, file])?.denied(&[])?;
        }
        let moved = format!("{file}.airlock-escape");
        w.probe(Net::Host, &["rename", file, &moved])?.denied(&[])?;
    }
    let p = w.probe(Net::Host, &["read", "/etc/passwd"])?;
    p.succeeded()?;
    let host_passwd = fs::read_to_string("/etc/passwd")?;
    let first = host_passwd.lines().next().unwrap_or_default();
    check!(
        p.stdout_has(first),
        "/etc/passwd inside does not read as the host's (first line {first:?}):\n      {}",
        p.run.describe()
    );
    for (file, bytes) in files.iter().zip(&before) {
        check!(
            fs::read(file)? == *bytes,
            "ESCAPE: host file {file} changed during the case"
        );
    }
    let scratch = s(&w.project.join("etc-control")).to_owned();
    let moved = format!("{scratch}.moved");
    w.probe(Net::Host, &["write", &scratch])?.succeeded()?;
    for attempt in ["open-write", "chmod-same", "chown-same"] {
        w.probe(Net::Host, &[attempt, &scratch])?.succeeded()?;
    }
    w.probe(Net::Host, &["rename", &scratch, &moved])?
        .succeeded()?;
    w.probe(Net::Host, &["unlink", &moved])?.succeeded()
}

pub fn write_project_sibling(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let sibling_secret = Secrets::sibling(&w);
    let targets = [
        w.sibling.join("airlock-escape-pwned"),
        w.base().join("airlock-escape-beside-project"),
    ];
    for target in &targets {
        w.probe(Net::Host, &["write-p", s(target)])?;
    }
    let secret = w.sibling.join("secret");
    w.probe(Net::Host, &["write", s(&secret)])?;
    for target in &targets {
        absent_on_host(target)?;
    }
    unchanged(&secret, &sibling_secret)?;
    control_project_write(&mut w)
}

/// Control: a relative symlink inside the project works.
fn control_link_in_project(w: &mut World) -> Outcome {
    let ok = w.project.join("link-ok");
    symlink("planted.txt", &ok)?;
    w.give_to_user()?;
    let p = w.probe(Net::Host, &["read", s(&ok)])?;
    p.succeeded()?;
    check!(
        p.stdout_has(&Secrets::planted(w)),
        "control: link-ok did not read the planted file:\n      {}",
        p.run.describe()
    );
    Ok(())
}

pub fn symlink_to_host_ssh_key(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let ssh = Secrets::ssh(&w);
    let (link, link_dir) = (w.project.join("link-ssh"), w.project.join("link-ssh-dir"));
    symlink(w.home.join(".ssh/id_ed25519"), &link)?;
    symlink(w.home.join(".ssh"), &link_dir)?;
    w.give_to_user()?;
    let p = w.probe(Net::Host, &["read", s(&link)])?;
    p.leaks_nothing(&ssh)?;
    p.denied(&[])?;
    w.probe(Net::Host, &["write", s(&link_dir.join("authorized_keys"))])?;
    absent_on_host(&w.home.join(".ssh/authorized_keys"))?;
    unchanged(&w.home.join(".ssh/id_ed25519"), &ssh)?;
    control_link_in_project(&mut w)
}

pub fn symlink_to_sibling(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let secret = Secrets::sibling(&w);
    let (link, link_dir) = (
        w.project.join("link-sibling"),
        w.project.join("link-sibling-dir"),
    );
    symlink("../sibling/secret", &link)?;
    symlink("../sibling", &link_dir)?;
    w.give_to_user()?;
    let p = w.probe(Net::Host, &["read", s(&link)])?;
    p.leaks_nothing(&secret)?;
    p.denied(&[])?;
    w.probe(
        Net::Host,
        &["write", s(&link_dir.join("airlock-escape-pwned"))],
    )?;
    absent_on_host(&w.sibling.join("airlock-escape-pwned"))?;
    unchanged(&w.sibling.join("secret"), &secret)?;
    control_link_in_project(&mut w)
}

pub fn project_write_visible(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    control_project_write(&mut w)
}

/// Run from a subdirectory of a git repository: the whole repository is the project (writable)
/// and the subdirectory stays the cwd.
pub fn git_toplevel_is_project(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let init = Command::new("git")
        .args(["init", "-q"])
        .arg(&w.project)
        .output()
        .map_err(|e| {
            skip(format!(
                "git is not installed ({e}); scripts/test installs it"
            ))
        })?;
    check!(
        init.status.success(),
        "git init failed: {}",
        String::from_utf8_lossy(&init.stderr)
    );
    let sub = w.project.join("sub/deeper");
    fs::create_dir_all(&sub)?;
    w.give_to_user()?;
    let cwd = w.airlock_in(&sub, &["run", "--", "../../probe", "probe", "cwd"])?;
    check!(
        cwd.code() == Some(0) && cwd.stdout.contains(&format!("cwd={}", sub.display())),
        "the cwd inside must stay {}:\n      {}",
        sub.display(),
        cwd.describe()
    );
    let up = w.airlock_in(
        &sub,
        &[
            "run",
            "--",
            "../../probe",
            "probe",
            "write",
            "../../from-sub",
        ],
    )?;
    check!(
        up.code() == Some(0),
        "writing at the git toplevel from a subdirectory failed:\n      {}",
        up.describe()
    );
    check!(
        w.project.join("from-sub").exists(),
        "the write at the git toplevel is not visible on the host:\n      {}",
        up.describe()
    );
    Ok(())
}
