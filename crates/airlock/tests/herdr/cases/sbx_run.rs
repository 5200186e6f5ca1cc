//! `airlock run --backend sbx` against the fake sbx: the calls it makes, the exit code passed
//! through, what it refuses before sbx is asked for anything, and values that must not become
//! sbx flags.

use std::path::Path;

use crate::check;
use crate::world::{Outcome, Run, World};

/// The flags that make a default spec one the sbx backend can run.
const RUNNABLE: &[&str] = &["--network", "host", "--no-hide-env"];

fn run_in(
    w: &World,
    project: &Path,
    flags: &[&str],
    command: &[&str],
    extra: &[(&str, &str)],
) -> Run {
    let p = project.display().to_string();
    let mut args = vec!["run", "--backend", "sbx", "--project", p.as_str()];
    args.extend(flags);
    args.push("--");
    args.extend(command);
    let mut env = vec![("FAKE_SBX_RUN", "1")];
    env.extend(extra);
    w.airlock(&args, &env)
}

fn sbx_calls(w: &World) -> Vec<Vec<String>> {
    w.argv_log("FAKE_SBX_LOG")
}

fn subcommands(w: &World) -> Vec<String> {
    sbx_calls(w).iter().map(|a| a[0].clone()).collect()
}

fn call(w: &World, sub: &str) -> Option<Vec<String>> {
    sbx_calls(w).into_iter().find(|a| a[0] == sub)
}

/// The VM `name` was removed with `sbx rm --force` and sbx has nothing left of it.
fn removed(w: &World, name: &str) -> Outcome {
    check!(
        call(w, "rm") == Some(vec!["rm".into(), "--force".into(), name.to_owned()]),
        "the VM is removed: {:?}",
        sbx_calls(w)
    );
    check!(w.sandbox(name).is_none(), "nothing is left in sbx");
    Ok(())
}

/// A default spec: sbx is checked, one VM created with the project as its workspace (`.git`
/// read-only in it), the command run in it with its exit code passed through, the VM removed.
pub fn default_spec_calls_and_exit_code() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("proj");
    let r = run_in(
        &w,
        &repo,
        RUNNABLE,
        &["sh", "-c", "echo inside; exit 7"],
        &[],
    );
    check!(
        r.code == 7,
        "the workload's exit code passes through: {}",
        r.show()
    );
    check!(
        r.stdout.contains("inside"),
        "its output reaches ours: {}",
        r.show()
    );
    check!(
        subcommands(&w) == ["version", "daemon", "ls", "create", "exec", "rm"],
        "checked, created, run, removed: {:?}",
        sbx_calls(&w)
    );
    let create = call(&w, "create").expect("create");
    let name = create[2].clone();
    check!(
        name.starts_with("airlock-proj-") && create[1] == "--name",
        "a name from the project: {create:?}"
    );
    let env_file = create[4].clone();
    check!(
        create[3] == "--env-file" && env_file.contains("/sbx/") && !Path::new(&env_file).exists(),
        "the env file is in the state and gone once sbx read it: {create:?}"
    );
    let r_ = repo.display().to_string();
    check!(
        create[5..] == ["shell".to_owned(), r_.clone(), format!("{r_}/.git:ro")],
        "the exact create argv: {create:?}"
    );
    let exec = call(&w, "exec").expect("exec");
    let expected: Vec<String> = [
        "exec",
        "--interactive",
        "--workdir",
        &r_,
        &name,
        "--",
        "sh",
        "-c",
        "echo inside; exit 7",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    check!(exec == expected, "the exact exec argv: {exec:?}");
    removed(&w, &name)
}

/// `--network none` denies every host in the VM; `--publish` maps the host's loopback port.
pub fn no_network_and_ports() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("proj");
    let r = run_in(
        &w,
        &repo,
        &[
            "--network",
            "none",
            "--no-hide-env",
            "--publish",
            "18080:3000",
        ],
        &["true"],
        &[],
    );
    check!(r.code == 0, "runs: {}", r.show());
    let create = call(&w, "create").expect("create");
    let has = |flag: &str, value: &str| create.windows(2).any(|p| p[0] == flag && p[1] == value);
    check!(has("--deny-network", "**"), "every host denied: {create:?}");
    check!(
        has("--publish", "127.0.0.1:18080:3000"),
        "the port published on loopback: {create:?}"
    );
    Ok(())
}

/// Only the config's variables, airlock's marker, the terminal and the locale reach the VM,
/// through the env file: a value that looks like a flag never reaches sbx's argv.
pub fn env_is_filtered_and_never_in_argv() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("proj");
    let config = w.root.join("config/airlock");
    std::fs::create_dir_all(&config).expect("mkdir");
    std::fs::write(
        config.join("config.toml"),
        "[sandbox]\nenv_passthrough = [\"PASSED\"]\n\n[sandbox.environment.MY_VAR]\nvalue = \"--privileged\"\n",
    )
    .expect("config");
    let script = "printf '%s|%s|%s|%s' \"$MY_VAR\" \"$PASSED\" \"$AIRLOCK_PROJECT\" \"$AIRLOCK_HOST_HOME_DIR\"";
    let r = run_in(
        &w,
        &repo,
        RUNNABLE,
        &["sh", "-c", script],
        &[("PASSED", "x y")],
    );
    check!(r.code == 0, "runs: {}", r.show());
    let line = r.stdout.lines().last().unwrap_or("");
    let fields: Vec<&str> = line.split('|').collect();
    check!(
        fields.len() == 4
            && fields[0] == "--privileged"
            && fields[1] == "x y"
            && fields[2].starts_with("proj-")
            && fields[3].is_empty(),
        "the config's variables and airlock's marker, no host path: {line:?} ({})",
        r.show()
    );
    let flat: Vec<String> = sbx_calls(&w).into_iter().flatten().collect();
    check!(
        !flat
            .iter()
            .any(|a| a.contains("privileged") || a.contains("x y")),
        "values stay out of sbx's argv: {flat:?}"
    );
    Ok(())
}

/// sbx down, logged out or missing: the error says what to do, and no sandbox is created.
pub fn sbx_not_ready_creates_nothing() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("proj");
    for (knob, says) in [
        ("FAKE_SBX_DAEMON", "sbx daemon start"),
        ("FAKE_SBX_LOGGED_OUT", "run sbx login"),
    ] {
        let value = if knob == "FAKE_SBX_DAEMON" {
            "down"
        } else {
            "1"
        };
        let r = run_in(&w, &repo, RUNNABLE, &["true"], &[(knob, value)]);
        check!(
            r.code != 0 && r.stderr.contains(says) && r.stderr.contains("nothing was created"),
            "{knob}: {}",
            r.show()
        );
        check!(
            call(&w, "create").is_none(),
            "no create: {:?}",
            sbx_calls(&w)
        );
    }
    let calls = sbx_calls(&w).len();
    let r = run_in(&w, &repo, RUNNABLE, &["true"], &[("PATH", "/usr/bin:/bin")]);
    check!(
        r.stderr.contains("docker-sbx"),
        "how to install: {}",
        r.show()
    );
    refused_before_sbx(&w, calls, &r, "needs the sbx CLI")
}

/// `r` failed saying `says`, and sbx was called no more than the `before` times it had been.
fn refused_before_sbx(w: &World, before: usize, r: &Run, says: &str) -> Outcome {
    check!(
        r.code != 0 && r.stderr.contains(says),
        "refused saying {says:?}: {}",
        r.show()
    );
    check!(
        sbx_calls(w).len() == before,
        "sbx not called: {:?}",
        sbx_calls(w)
    );
    Ok(())
}

/// What the VM cannot honour is refused, naming the backend, the feature and the way out, before
/// sbx is called at all.
pub fn refusals_call_no_sbx() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("proj");
    let cases: [(&[&str], &str); 3] = [
        (&["--no-hide-env"], "egress proxy"),
        (&["--network", "host"], "--no-hide-env"),
        (
            &[
                "--network",
                "host",
                "--no-hide-env",
                "--git-mode",
                "readwrite",
            ],
            "--git-mode readonly",
        ),
    ];
    for (flags, says) in cases {
        let r = run_in(&w, &repo, flags, &["true"], &[]);
        check!(
            r.stderr.contains("the sbx backend"),
            "{flags:?}: {}",
            r.show()
        );
        refused_before_sbx(&w, 0, &r, says)?;
    }
    let config = w.root.join("config/airlock");
    std::fs::create_dir_all(&config).expect("mkdir");
    for (toml, says) in [
        ("[tools.docker]\nenabled = true\n", "docker socket"),
        ("[sandbox.resources]\npids = 100\n", "no process limit"),
        ("[sandbox.resources]\ncpus = 1.5\n", "whole CPUs"),
    ] {
        std::fs::write(config.join("config.toml"), toml).expect("config");
        let r = run_in(&w, &repo, RUNNABLE, &["true"], &[]);
        check!(
            r.stderr.contains("the sbx backend"),
            "{toml:?}: {}",
            r.show()
        );
        refused_before_sbx(&w, 0, &r, says)?;
    }
    Ok(())
}

/// A project directory an attacker named (spaces, a leading dash) and a command that looks like
/// sbx flags: the name is cleaned, the path passed as one argument, the command after `--`.
pub fn hostile_names_cannot_inject_flags() -> Outcome {
    let w = World::new();
    let dir = w.root.join("-rf --name default");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let dir = std::fs::canonicalize(&dir).expect("canonical");
    let r = run_in(
        &w,
        &dir,
        RUNNABLE,
        &["sh", "-c", "exit 3", "--deny-network", "--name"],
        &[],
    );
    check!(r.code == 3, "runs: {}", r.show());
    let create = call(&w, "create").expect("create");
    check!(
        create[2].starts_with("airlock--rf---name-default-")
            && create.last().map(String::as_str) == Some(dir.to_str().expect("utf-8")),
        "a cleaned name, the path as one argument: {create:?}"
    );
    let exec = call(&w, "exec").expect("exec");
    let at = exec.iter().position(|a| a == "--").expect("--");
    check!(
        exec[at + 1..] == ["sh", "-c", "exit 3", "--deny-network", "--name"],
        "the command after --: {exec:?}"
    );
    let bad = w.root.join("a\nb");
    std::fs::create_dir_all(&bad).expect("mkdir");
    let before = sbx_calls(&w).len();
    let r = run_in(&w, &bad, RUNNABLE, &["true"], &[]);
    refused_before_sbx(&w, before, &r, "cannot name")
}

/// `--print-spec --render` prints the three calls and calls nothing; `doctor` has a row.
pub fn render_and_doctor() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("proj");
    let p = repo.display().to_string();
    let mut args = vec![
        "run",
        "--backend",
        "sbx",
        "--project",
        &p,
        "--print-spec",
        "--render",
    ];
    args.extend(RUNNABLE);
    args.extend(["--", "make", "test"]);
    let r = w.airlock(&args, &[]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    let sbx = w.root.join("bin/sbx").display().to_string();
    check!(
        r.code == 0
            && lines.len() == 3
            && lines[0].starts_with(&format!("{sbx} create --name airlock-proj-"))
            && lines[0].ends_with(&format!("shell {p} {p}/.git:ro"))
            && lines[1].ends_with(" -- make test")
            && lines[2].starts_with(&format!("{sbx} rm --force airlock-proj-")),
        "create, exec, rm: {}",
        r.show()
    );
    check!(
        sbx_calls(&w).is_empty(),
        "render calls no sbx: {:?}",
        sbx_calls(&w)
    );
    // The same from `$AIRLOCK_BACKEND` and from `[sandbox] backend`.
    let without: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| *a != "--backend" && *a != "sbx")
        .collect();
    let by_env = w.airlock(&without, &[("AIRLOCK_BACKEND", "sbx")]);
    check!(
        by_env.code == 0
            && by_env.stdout.lines().count() == 3
            && by_env.stdout.contains(" create --name "),
        "AIRLOCK_BACKEND=sbx: {}",
        by_env.show()
    );
    let config = w.root.join("config/airlock");
    std::fs::create_dir_all(&config).expect("mkdir");
    std::fs::write(config.join("config.toml"), "[sandbox]\nbackend = \"sbx\"\n").expect("config");
    let by_config = w.airlock(&without, &[]);
    check!(
        by_config.code == 0
            && by_config.stdout.lines().count() == 3
            && by_config.stdout.contains(" exec --interactive "),
        "[sandbox] backend = \"sbx\": {}",
        by_config.show()
    );
    let r = w.airlock(&["doctor"], &[]);
    check!(
        r.stdout.contains("backend sbx") && r.stdout.contains("signed in"),
        "doctor's row: {}",
        r.show()
    );
    let r = w.airlock(&["doctor"], &[("FAKE_SBX_LOGGED_OUT", "1")]);
    check!(
        r.stdout.contains("run sbx login"),
        "doctor says how: {}",
        r.show()
    );
    Ok(())
}

/// A SIGTERM to airlock while the command runs is passed on to `sbx exec`, and the VM is still
/// removed before airlock dies of the same signal.
pub fn a_signal_still_removes_the_vm() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("proj");
    let mark = w.root.join("started");
    let script = format!("touch '{}'; exec sleep 10", mark.display());
    let p = repo.display().to_string();
    let mut args = vec!["run", "--backend", "sbx", "--project", p.as_str()];
    args.extend(RUNNABLE);
    args.extend(["--", "sh", "-c", script.as_str()]);
    let mut child = w
        .command(&w.plugin_root.join("bin/airlock"))
        .args(&args)
        .env("FAKE_SBX_RUN", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    w.wait_for("the command to start in the VM", || mark.exists())?;
    // SAFETY: a signal to our own child, still unreaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().map_err(|e| e.to_string())?;
    use std::os::unix::process::ExitStatusExt as _;
    check!(
        status.signal() == Some(libc::SIGTERM),
        "airlock dies of the signal: {status:?}"
    );
    let name = call(&w, "create").expect("create")[2].clone();
    removed(&w, &name)
}

/// `run --worktree` with sbx: the worktree is the workspace, and the repository its `.git` file
/// points to, outside it, is carried read-only (git works inside, and cannot be written).
pub fn a_worktree_carries_its_repository_read_only() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("proj");
    let mut flags = vec!["--worktree=feat"];
    flags.extend(RUNNABLE);
    let r = run_in(
        &w,
        &repo,
        &flags,
        &["git", "rev-parse", "--abbrev-ref", "HEAD"],
        &[],
    );
    check!(
        r.code == 0 && r.stdout.contains("feat"),
        "runs in the worktree: {}",
        r.show()
    );
    let create = call(&w, "create").expect("create");
    let git_ro = format!("{}/.git:ro", repo.display());
    check!(
        create[6].ends_with("/worktrees/feat") && create[7..].contains(&git_ro),
        "the worktree, then its repository read-only: {create:?}"
    );
    Ok(())
}

/// The VM writes the project (sbx's workspace, read-write): a repository it makes there, with a
/// config that would run on the host's next `git status`, is quarantined when the session ends,
/// as after a native session. Control: a plain directory it makes stays as it is.
pub fn a_repository_made_in_the_workspace_is_quarantined() -> Outcome {
    let w = World::new();
    let repo = w.git_repo("proj");
    let r = run_in(
        &w,
        &repo,
        RUNNABLE,
        &[
            "sh",
            "-c",
            "mkdir -p planted/.git notes && echo '[core] fsmonitor = touch /tmp/pwned' > planted/.git/config && echo n > notes/n.txt",
        ],
        &[],
    );
    check!(r.code == 0, "{}", r.show());
    check!(
        !repo.join("planted/.git").exists()
            && repo.join("planted/.git.airlock-quarantine").is_dir(),
        "the VM's repository is out of git's sight: {}",
        r.show()
    );
    check!(
        std::fs::read_to_string(repo.join("notes/n.txt"))
            .ok()
            .as_deref()
            == Some("n\n"),
        "control: {}",
        r.show()
    );
    Ok(())
}
