//! Masks that hold: the host replacing a hidden file, a hidden file's parent moved out of the
//! walk's reach, secrets at any depth or created during a session, the sanitised `.git/config`
//! replaced by the host's git.
//!
//! Each case reads inside a running session after the host acted, and its control shows the
//! session sees the host's changes live (or that the attack leaks when the protection is off),
//! so a secret's absence is the keeper's doing.

use std::fs;
use std::path::PathBuf;

use super::{Findings, Session, git_mode, git_ok, on_host, repo, world};
use crate::cases::files::s;
use crate::harness::{Failure, Mode, Outcome, Run, World, fail};

/// A session that waits for `stop`, gives the keeper a moment, then prints each file on one line
/// as `<path>: [<content>]` (newlines read as spaces).
fn reader(w: &mut World, files: &[&str]) -> Result<Session, Failure> {
    let mut script =
        String::from(": > ready\nwhile [ ! -e stop ]; do sleep 0.05; done\nsleep 0.3\n");
    for file in files {
        script.push_str(&format!(
            "printf '%s: [%s]\\n' '{file}' \"$(cat '{file}' 2>&1 | tr '\\n' ' ')\"\n"
        ));
    }
    let (ready, stop) = (w.project.join("ready"), w.project.join("stop"));
    Session::start(w, &script, &ready, &stop)
}

/// Host steps as the mode's user; they must succeed.
fn host(w: &mut World, script: &str) -> Outcome {
    let project = w.project.clone();
    let run = on_host(w, &project, script)?;
    if run.code() == Some(0) {
        return Ok(());
    }
    Err(fail(format!(
        "the host step failed (a harness failure):\n      {}",
        run.describe()
    )))
}

/// `file`'s line in a reader's output.
fn seen<'a>(run: &'a Run, file: &str) -> &'a str {
    let prefix = format!("{file}: [");
    run.stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|l| l.strip_suffix(']'))
        .unwrap_or("<not printed>")
}

fn check_hidden(f: &mut Findings, run: &Run, file: &str, secret: &str) {
    let got = seen(run, file);
    f.check(!got.contains(secret) && got.is_empty(), || {
        format!(
            "LEAK: {file} read {got:?} inside after the host's change (want empty):\n      {}",
            run.describe()
        )
    });
}

/// The control every case ends with: `live.txt`, written by the host in the same step as the
/// attack, reads inside as the host wrote it.
fn check_live(run: &Run, value: &str) -> Outcome {
    let got = seen(run, "live.txt");
    if got == value {
        return Ok(());
    }
    Err(fail(format!(
        "control failed (a harness failure, not a pass): live.txt read {got:?} inside, want {value:?}, so the session did not see the host's changes:\n      {}",
        run.describe()
    )))
}

/// `sed -i`, an editor, a secret manager: the host writes a new secret to a temporary file and
/// renames it over the hidden one (the kernel drops a mask whose file is replaced); it also
/// creates new ones, at any depth, during the session.
pub fn mask_host_replaces(mode: &Mode) -> Outcome {
    let mut w = world(mode)?;
    let fresh = format!("FRESH-{}", w.token);
    w.put(&w.project.join("a/b/c/d/e/.env"), "DEEP=1\n")?;
    w.give_to_user()?;
    let files = [
        ".env",
        "config/.env.production",
        "a/b/c/d/e/.env",
        "x/y/z/w/.env.local",
        "x/.envrc",
        "live.txt",
    ];
    let session = reader(&mut w, &files)?;
    host(
        &mut w,
        &format!(
            "set -e\nprintf '{fresh}' > .env.tmp && mv .env.tmp .env\n\
             printf '{fresh}' > c.tmp && mv c.tmp config/.env.production\n\
             printf '{fresh}' > d.tmp && mv d.tmp a/b/c/d/e/.env\n\
             mkdir -p x/y/z/w && printf '{fresh}' > x/y/z/w/.env.local && printf '{fresh}' > x/.envrc\n\
             printf '{fresh}' > live.txt\n"
        ),
    )?;
    let run = session.stop()?;
    let mut f = Findings::default();
    for file in &files[..5] {
        check_hidden(&mut f, &run, file, &fresh);
    }
    f.outcome()?;
    check_live(&run, &fresh)?;

    // Control: a plain mask (a `hidden` custom mount, which the keeper does not hold) shows the
    // replaced file; the attack is real.
    let mut c = world(mode)?;
    let env = c.project.join(".env");
    c.put(
        &c.home.join(".config/airlock/config.toml"),
        &format!(
            "[sandbox]\nhide_env_files = false\n[[sandbox.mounts]]\npath = \"{}\"\nmode = \"hidden\"\n",
            s(&env)
        ),
    )?;
    c.give_to_user()?;
    let session = reader(&mut c, &[".env"])?;
    host(
        &mut c,
        &format!("printf '{fresh}' > .env.tmp && mv .env.tmp .env"),
    )?;
    let run = session.stop()?;
    if seen(&run, ".env") != fresh {
        return Err(fail(format!(
            "control failed (a harness failure, not a pass): a plain mask over .env still hid the file the host renamed over it:\n      {}",
            run.describe()
        )));
    }
    Ok(())
}

/// Session 1 moves a hidden file's parent into a directory the walk skips (`node_modules`);
/// the next session must still hide it there.
pub fn mask_moved_parent(mode: &Mode) -> Outcome {
    let mut w = world(mode)?;
    let secret = crate::harness::Secrets::env(&w);
    let moved = "node_modules/pkg/config/.env.production";
    let project = w.project.clone();
    let run = super::inside(
        &mut w,
        &project,
        "set -e; mkdir -p node_modules/pkg; mv config node_modules/pkg/; echo moved",
    )?;
    if !run.stdout.contains("moved") {
        return Err(fail(format!(
            "session 1 could not move config/ (a harness failure):\n      {}",
            run.describe()
        )));
    }
    let second = |w: &mut World| {
        let project = w.project.clone();
        super::inside(
            w,
            &project,
            &format!("printf '{moved}: [%s]\\n' \"$(cat {moved})\""),
        )
    };
    let run = second(&mut w)?;
    let mut f = Findings::default();
    check_hidden(&mut f, &run, moved, &secret);
    f.outcome()?;

    // Control: without the index session 1 left, the secret reads in its new place.
    for index in indexes(&w)? {
        fs::remove_file(index)?;
    }
    let run = second(&mut w)?;
    if seen(&run, moved) != secret.trim_end() {
        return Err(fail(format!(
            "control failed (a harness failure, not a pass): with no index, {moved} still read hidden:\n      {}",
            run.describe()
        )));
    }
    Ok(())
}

/// Every `hidden.json` under the world's sandbox state.
fn indexes(w: &World) -> Result<Vec<PathBuf>, Failure> {
    let dir = w.home.join(".local/share/airlock/sandboxes");
    let found: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(|e| fail(format!("no sandbox state in {}: {e}", dir.display())))?
        .filter_map(Result::ok)
        .map(|e| e.path().join("hidden.json"))
        .filter(|p| p.is_file())
        .collect();
    if found.is_empty() {
        return Err(fail(format!(
            "no hidden.json under {}: the keeper recorded nothing",
            dir.display()
        )));
    }
    Ok(found)
}

/// The host's git rewrites `.git/config` by a rename (`config.lock`); in `readonly` mode the
/// sanitised view bound over it must stay, so a token the host adds is not readable inside.
pub fn git_config_stays_sanitised(mode: &Mode) -> Outcome {
    let mut w = world(mode)?;
    let project = w.project.clone();
    repo(&mut w, &project)?;
    git_mode(&w, "readonly")?;
    let token = format!("tok-{}", w.token);
    git_ok(
        &mut w,
        &project,
        &[
            "remote",
            "add",
            "origin",
            "https://u:old-secret@example.com/a.git",
        ],
    )?;
    let session = reader(&mut w, &[".git/config", "live.txt"])?;
    let url = format!("https://u:{token}@example.com/b.git");
    git_ok(&mut w, &project, &["remote", "set-url", "origin", &url])?;
    host(&mut w, &format!("printf '{token}' > live.txt"))?;
    let run = session.stop()?;
    let config = seen(&run, ".git/config");
    let mut f = Findings::default();
    f.check(!config.contains(&token) && !config.contains("old-secret"), || {
        format!(
            "LEAK: .git/config inside shows a remote credential after the host's git rewrote it:\n      {}",
            run.describe()
        )
    });
    f.check(config.contains("example.com/a.git"), || {
        format!(
            ".git/config inside is not the sanitised view taken at launch:\n      {}",
            run.describe()
        )
    });
    f.outcome()?;
    check_live(&run, &token)?;
    let host_config = fs::read_to_string(project.join(".git/config"))?;
    if !host_config.contains(&token) {
        return Err(fail(
            "control failed (a harness failure, not a pass): the host's .git/config does not hold the new URL",
        ));
    }
    Ok(())
}

/// `[sandbox] hide` globs: a name at any depth, a path from the project root, a directory; the
/// same name elsewhere than the path rule says stays readable (the control).
pub fn hide_globs(mode: &Mode) -> Outcome {
    let mut w = world(mode)?;
    let secret = format!("GLOB-{}", w.token);
    for file in [
        "a/b/server.pem",
        "secrets/token",
        "config/master.key",
        "app/config/master.key",
    ] {
        w.put(&w.project.join(file), &secret)?;
    }
    w.put(
        &w.home.join(".config/airlock/config.toml"),
        "[sandbox]\nhide = [\"*.pem\", \"/secrets\", \"/config/master.key\"]\n",
    )?;
    w.give_to_user()?;
    let files = [
        "a/b/server.pem",
        "secrets/token",
        "config/master.key",
        "late.pem",
        "app/config/master.key",
        "live.txt",
    ];
    let session = reader(&mut w, &files)?;
    host(
        &mut w,
        &format!("printf '{secret}' > late.pem && printf '{secret}' > live.txt"),
    )?;
    let run = session.stop()?;
    let mut f = Findings::default();
    for file in ["a/b/server.pem", "config/master.key", "late.pem"] {
        check_hidden(&mut f, &run, file, &secret);
    }
    let token = seen(&run, "secrets/token");
    f.check(!token.contains(&secret), || {
        format!(
            "LEAK: secrets/token read {token:?} inside (its directory is hidden):\n      {}",
            run.describe()
        )
    });
    f.outcome()?;
    check_live(&run, &secret)?;
    if seen(&run, "app/config/master.key") != secret {
        return Err(fail(format!(
            "control failed (a harness failure, not a pass): app/config/master.key, which no rule names, did not read back:\n      {}",
            run.describe()
        )));
    }
    Ok(())
}
