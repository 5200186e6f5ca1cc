//! `[sandbox.resources]`: the sandbox's own tmpfs sized, limits applied with cgroup v2 or the
//! launch refused with the reason, bad values named with their file and key.

mod common;

use std::fs;

use common::{TestHome, report, sandbox_starts, stderr, stdout};

fn run(h: &TestHome, script: &str) -> std::process::Output {
    h.airlock(&["run", "--network", "none", "--", "sh", "-c", script])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("airlock")
}

/// `df -k` size (KiB) of each path, as the sandbox sees it.
fn sizes(out: &str) -> Vec<u64> {
    out.lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect()
}

#[test]
fn each_tmpfs_of_the_sandbox_is_bounded_by_tmp_size_or_a_share_of_ram() {
    if !sandbox_starts() {
        eprintln!("skipped: the sandbox cannot start here");
        return;
    }
    let h = TestHome::new("home/code/app");
    let df = "df -k /tmp /var/tmp /run /dev/shm | tail -n +2";
    h.config("[sandbox.resources]\ntmp_size = \"64M\"\n");
    let out = run(&h, df);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(sizes(&stdout(&out)), [65536; 4], "{}", report(&out));
    // The default: 12% of RAM each (at least 64 MiB), not the kernel's half.
    h.config("");
    let out = run(&h, df);
    let ram_kib = airlock_sandbox::host::ram_bytes() / 1024;
    let expected = (ram_kib / 100 * 12).max(65536);
    for size in sizes(&stdout(&out)) {
        assert!(
            size.abs_diff(expected) <= expected / 50 + 8,
            "{size} KiB, expected about {expected} KiB: {}",
            report(&out)
        );
    }
}

/// Whether this process's cgroup v2 group offers memory and pids to its children and holds
/// nothing but us (what a launch needs to apply limits).
fn cgroup_v2_delegated() -> Result<(), String> {
    let group = airlock_sandbox::native::cgroup::own_group_here()?;
    let offered = fs::read_to_string(group.join("cgroup.controllers")).unwrap_or_default();
    for c in ["memory", "pids"] {
        if !offered.split_whitespace().any(|o| o == c) {
            return Err(format!(
                "{} does not offer the {c} controller",
                group.display()
            ));
        }
    }
    Ok(())
}

#[test]
fn limits_are_applied_or_the_launch_is_refused_with_the_reason() {
    if !sandbox_starts() {
        eprintln!("skipped: the sandbox cannot start here");
        return;
    }
    let h = TestHome::new("home/code/app");
    h.config("[sandbox.resources]\nmemory = \"256M\"\npids = 64\n");
    match cgroup_v2_delegated() {
        Err(why) => {
            // This machine cannot apply them: the launch is refused, the workload never runs.
            let out = run(&h, "touch ran");
            assert!(!out.status.success(), "{}", report(&out));
            assert!(
                stderr(&out).contains("[sandbox.resources] cannot be applied here"),
                "{}",
                report(&out)
            );
            assert!(
                !h.project.join("ran").exists(),
                "the workload ran unlimited"
            );
            eprintln!("containment not tested here: {why}");
        }
        Ok(()) => {
            // A memory hog is killed at the limit and reported; a fork bomb stops at pids.
            let out = run(
                &h,
                "python3 -c 'a = bytearray(1 << 30); a[::4096] = b\"x\" * (len(a) // 4096)'",
            );
            assert!(!out.status.success(), "{}", report(&out));
            assert!(
                stderr(&out).contains("ran out of memory"),
                "{}",
                report(&out)
            );
            let out = run(
                &h,
                "for i in $(seq 200); do sleep 2 & done 2>/dev/null; wait; echo done",
            );
            assert!(
                stderr(&out).contains("refused at the process limit"),
                "{}",
                report(&out)
            );
        }
    }
}

#[test]
fn bad_values_name_the_file_the_key_and_the_valid_form() {
    let h = TestHome::new("home/code/app");
    for (line, expected) in [
        (
            "memory = \"lots\"",
            "memory = \"lots\" is not valid; expected a size such as",
        ),
        (
            "cpus = 0",
            "cpus = 0 is not valid; expected a number of CPUs greater than 0",
        ),
        (
            "pids = -1",
            "pids = -1 is not valid; expected a whole number of processes",
        ),
        (
            "tmp_size = \"150%\"",
            "tmp_size = \"150%\" is not valid; expected a size",
        ),
    ] {
        let config = h.config(&format!("[sandbox.resources]\n{line}\n"));
        let out = run(&h, "true");
        assert!(!out.status.success(), "{line}: {}", report(&out));
        let err = stderr(&out);
        assert!(err.contains(&config.display().to_string()), "{line}: {err}");
        assert!(
            err.contains(&format!("[sandbox.resources] {expected}")),
            "{line}: {err}"
        );
    }
    assert!(!h.sandboxes().exists(), "nothing created");
}

/// A systemd-run for the tests, faithful to what `--scope` does with the command: it checks the
/// options airlock must pass, records them, and execs the command after `--` in place (here in
/// the same group: this machine has no user manager to make a real scope).
const FAKE_SYSTEMD_RUN: &str = r#"#!/bin/sh
printf '%s\n' "$*" >> "$(dirname "$0")/calls"
[ "$1 $2 $3" = "--user --scope --quiet" ] || { echo "fake systemd-run: bad options: $*" >&2; exit 1; }
while [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"#;

/// Limits this process's group cannot take, with a systemd user manager there: airlock runs itself
/// again in a delegated scope (`systemd-run --user --scope -p Delegate=yes`), once, and that run
/// applies the limits or, as in a scope that is not delegated, refuses with the reason. Control:
/// without a user manager, systemd-run is never asked.
#[test]
fn limits_the_group_cannot_take_are_asked_of_the_users_systemd_in_a_scope() {
    use std::os::unix::fs::PermissionsExt as _;
    let limits = airlock_sandbox::spec::Limits {
        tmpfs_bytes: 0,
        memory: Some(256 << 20),
        cpus_milli: None,
        pids: Some(64),
    };
    let Some(why) = airlock_sandbox::native::cgroup::preflight(&limits) else {
        eprintln!(
            "skipped: this process's cgroup can take the limits itself, so no scope is asked"
        );
        return;
    };
    if !sandbox_starts() {
        return;
    }
    // Outside /tmp: airlock never runs a host program from a directory a sandbox can write.
    let tools = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let bin = tools.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    fs::write(bin.join("systemd-run"), FAKE_SYSTEMD_RUN).unwrap();
    fs::set_permissions(bin.join("systemd-run"), fs::Permissions::from_mode(0o755)).unwrap();
    let runtime = tools.path().join("runtime");
    fs::create_dir_all(runtime.join("systemd")).unwrap();
    let h = TestHome::new("home/code/app");
    h.config("[sandbox.resources]\nmemory = \"256M\"\npids = 64\n");
    let launch = |runtime: &std::path::Path| {
        h.airlock(&["run", "--network", "none", "--", "touch", "ran"])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("XDG_RUNTIME_DIR", runtime)
            .output()
            .expect("airlock")
    };
    let calls = bin.join("calls");

    // Control: no user manager (no private socket), no scope asked.
    let out = launch(&runtime);
    assert!(!calls.exists(), "{}", report(&out));
    assert!(
        stderr(&out).contains("cannot be applied here"),
        "{}",
        report(&out)
    );

    let _manager =
        std::os::unix::net::UnixListener::bind(runtime.join("systemd/private")).expect("bind");
    let out = launch(&runtime);
    let asked = fs::read_to_string(&calls).unwrap_or_default();
    assert_eq!(
        asked.lines().count(),
        1,
        "asked once: {asked}\n{}",
        report(&out)
    );
    let expected = format!(
        "--user --scope --quiet --collect -p Delegate=yes --unit airlock-{}-",
        airlock_sandbox::state::sandbox_name(&h.project)
    );
    assert!(asked.starts_with(&expected), "{asked}");
    assert!(
        asked.trim_end().ends_with(&format!(
            ".scope -- {} run --network none -- touch ran",
            common::AIRLOCK
        )),
        "{asked}"
    );
    // The fake scope is the same group, so the second run refuses, naming the scope.
    assert!(!out.status.success(), "{}", report(&out));
    assert!(
        stderr(&out).contains("even in the systemd user scope airlock ran itself in"),
        "{}",
        report(&out)
    );
    assert!(
        !h.project.join("ran").exists(),
        "the workload ran unlimited"
    );
    eprintln!("the scope path is tested with a fake systemd-run here: {why}");
}
