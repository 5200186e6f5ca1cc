//! What airlock itself reads and runs on the host at launch and exit: programs found on a `PATH`
//! entry inside the project, a `.git` symlinked out of the project, FIFOs where config files are
//! expected.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{OpenOptionsExt as _, symlink};
use std::path::Path;
use std::time::Duration;

use super::{Findings, git_mode, inside, marker, names, on_host, prelude, prepared, repo, world};
use crate::cases::files::s;
use crate::check;
use crate::harness::{
    Failure, Mode, Outcome, Run, World, chown_tree, fail, wait_deadline, wait_until,
};

/// `bin/git` in the project: the planted program, then the real git.
fn git_wrapper_script(w: &World) -> String {
    format!(
        "{}mkdir -p bin\nplant bin/git\necho 'exec /usr/bin/git \"$@\"' >> bin/git\necho trust-prepared\n",
        prelude(w)
    )
}

/// The `PATH` a direnv `PATH_add bin` gives: the project's `bin` first.
fn poisoned_path(w: &World) -> String {
    format!("{}/bin:/usr/local/bin:/usr/bin:/bin", s(&w.project))
}

/// `airlock <args>` from the project with the poisoned `PATH`.
fn airlock_with_path(w: &mut World, args: &[&str]) -> Result<Run, Failure> {
    let mut cmd = w.mode.command(&w.mode.airlock, &w.home);
    cmd.args(args)
        .current_dir(&w.project)
        .env("PATH", poisoned_path(w));
    let described = format!("(PATH={}) airlock {}", poisoned_path(w), args.join(" "));
    w.run_host(cmd, described)
}

/// `trust-path-planted-git` (`readonly` and `readwrite`): with the project's `bin` first on the
/// host `PATH` airlock is started with, a `bin/git` written inside is never run by airlock on the
/// host, neither at that session's exit nor by the next `airlock run -- true`.
pub fn path_planted_git(mode: &Mode) -> Outcome {
    let mut c = world(mode)?;
    let project = c.project.clone();
    repo(&mut c, &project)?;
    let script = git_wrapper_script(&c);
    let planted = on_host(&mut c, &project, &script)?;
    let path = poisoned_path(&c);
    let version = on_host(
        &mut c,
        &project,
        &format!("PATH={path}; export PATH; git --version"),
    )?;
    check!(
        planted.code() == Some(0) && version.code() == Some(0) && marker(&c).exists(),
        "control failed (a harness failure, not a pass): `git --version` with PATH={path} did not run the planted bin/git:\n      {}\n      {}",
        planted.describe(),
        version.describe()
    );

    let mut f = Findings::default();
    for git in ["readonly", "readwrite"] {
        let mut w = world(mode)?;
        let project = w.project.clone();
        repo(&mut w, &project)?;
        git_mode(&w, git)?;
        let script = git_wrapper_script(&w);
        let run = airlock_with_path(
            &mut w,
            &["run", "--network", "none", "--", "sh", "-c", &script],
        )?;
        prepared(&run)?;
        check!(
            project.join("bin/git").is_file(),
            "bin/git written inside is not in the project on the host:\n      {}",
            run.describe()
        );
        f.label(git);
        f.no_marker(
            &w,
            &format!("the session that wrote bin/git ({})", run.described),
        );
        let next = airlock_with_path(&mut w, &["run", "--", "true"])?;
        f.no_marker(&w, &format!("the next session ({})", next.describe()));
    }
    f.outcome()
}

/// Creates a FIFO at `path`, owned by the mode's user.
fn mkfifo(w: &World, path: &Path) -> Outcome {
    let c = CString::new(path.as_os_str().as_bytes()).expect("no NUL in temp paths");
    // SAFETY: a plain system call on a valid C string.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o644) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    if let Some(u) = &w.mode.user {
        chown_tree(path, u.uid, u.gid)?;
    }
    Ok(())
}

/// Lets whoever is blocked opening or reading the FIFO go: an open for writing that does not
/// block succeeds only while the FIFO has a reader, and closing it gives that reader end-of-file.
fn release(fifo: &Path) {
    wait_until(Duration::from_secs(5), || {
        fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
            .is_err()
    });
}

/// The harness deadline for a launch facing a FIFO: it must end by then, not hang.
const FIFO_DEADLINE: Duration = Duration::from_secs(20);

/// `airlock run -- true` from the project; `Err(text)` when it was still running after
/// [`FIFO_DEADLINE`] (it is then killed and the FIFO's readers let go).
fn run_facing(w: &mut World, fifo: &Path) -> Result<Result<Run, String>, Failure> {
    let cwd = w.project.clone();
    let args = ["run", "--", "true"];
    let (mut cmd, out, err) = w.airlock_command(&cwd, &args)?;
    let described = format!("(a FIFO at {}) airlock {}", fifo.display(), args.join(" "));
    let mut child = cmd
        .spawn()
        .map_err(|e| fail(format!("could not start {described}: {e}")))?;
    let status = wait_deadline(&mut child, FIFO_DEADLINE)?;
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    release(fifo);
    let read = |p: &Path| String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned();
    Ok(match status {
        Some(status) => Ok(Run {
            described,
            status,
            stdout: read(&out),
            stderr: read(&err),
            terminal_mode: None,
        }),
        None => Err(format!(
            "{described}\n      hung: still running after {FIFO_DEADLINE:?} (killed)\n      stderr so far: {}",
            read(&err).trim()
        )),
    })
}

/// A launch facing a FIFO ends in time, with exit 0 or 125 and a message naming the path.
fn ends_naming(f: &mut Findings, outcome: Result<Run, String>, name: &str) {
    match outcome {
        Err(hung) => f.check(false, || hung),
        Ok(run) => f.check(
            matches!(run.code(), Some(0 | 125)) && names(&run.stderr, name),
            || {
                format!(
                    "expected exit 0 or 125 and a message naming {name}:\n      {}",
                    run.describe()
                )
            },
        ),
    }
}

/// `trust-git-link-not-followed`: (a) a project whose `.git` is a symlink to a directory outside
/// it (`readonly`, `readwrite`, `disabled`): nothing is created in that directory, and airlock
/// exits 0 or 125 naming `.git`; (b) a FIFO `.airlock.toml`, and a FIFO `.git/config` (`readonly`,
/// `readwrite`): `airlock run -- true` ends within 20 s with exit 0 or 125 and a message naming
/// the path, instead of hanging. Controls: a regular `.airlock.toml` is read (and reported as
/// untrusted), a regular repository works inside.
pub fn git_link_not_followed(mode: &Mode) -> Outcome {
    let mut c = world(mode)?;
    c.put(
        &c.project.join(".airlock.toml"),
        "[tools.git]\nmode = \"readonly\"\n",
    )?;
    c.give_to_user()?;
    let run = c.airlock(&["run", "--", "true"])?;
    check!(
        run.code() == Some(0) && run.stderr.contains("is not trusted and was ignored"),
        "control failed (a harness failure, not a pass): a regular .airlock.toml was not read:\n      {}",
        run.describe()
    );
    for git in ["readonly", "readwrite"] {
        let mut c = world(mode)?;
        let project = c.project.clone();
        repo(&mut c, &project)?;
        git_mode(&c, git)?;
        let run = inside(&mut c, &project, "git rev-parse --is-inside-work-tree")?;
        check!(
            run.code() == Some(0) && run.stdout.trim() == "true",
            "control failed (a harness failure, not a pass): a regular repository does not work inside in mode {git}:\n      {}",
            run.describe()
        );
    }

    let mut f = Findings::default();
    for git in ["readonly", "readwrite", "disabled"] {
        let mut w = world(mode)?;
        let target = w.sibling.join("target-dir");
        fs::create_dir(&target)?;
        symlink(&target, w.project.join(".git"))?;
        git_mode(&w, git)?;
        let run = w.airlock(&["run", "--", "true"])?;
        f.label(&format!("(a) .git -> {}, mode {git}", target.display()));
        let created: Vec<String> = fs::read_dir(&target)?
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        f.check(created.is_empty(), || {
            format!(
                "ESCAPE: airlock created {created:?} in {}, outside the project, through the .git symlink:\n      {}",
                target.display(),
                run.describe()
            )
        });
        f.check(
            matches!(run.code(), Some(0 | 125)) && names(&run.stderr, ".git"),
            || {
                format!(
                    "expected exit 0 or 125 and a message naming .git:\n      {}",
                    run.describe()
                )
            },
        );
    }

    let mut w = world(mode)?;
    let toml = w.project.join(".airlock.toml");
    mkfifo(&w, &toml)?;
    f.label("(b) FIFO .airlock.toml");
    let outcome = run_facing(&mut w, &toml)?;
    ends_naming(&mut f, outcome, ".airlock.toml");

    for git in ["readonly", "readwrite"] {
        let mut w = world(mode)?;
        let project = w.project.clone();
        repo(&mut w, &project)?;
        git_mode(&w, git)?;
        let config = project.join(".git/config");
        fs::remove_file(&config)?;
        mkfifo(&w, &config)?;
        f.label(&format!("(b) FIFO .git/config, mode {git}"));
        let outcome = run_facing(&mut w, &config)?;
        ends_naming(&mut f, outcome, ".git/config");
    }
    f.outcome()
}
