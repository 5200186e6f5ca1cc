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
