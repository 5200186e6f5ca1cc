//! `[[sandbox.mounts]]` end to end: patterns expanded on the host, `hidden` matches read empty
//! inside, `overlay` and `tmpoverlay` directories whose writes never reach the host, and the
//! refusals and warnings a user sees.

mod common;

use std::fs;
use std::process::Output;

use common::{TestHome, report, sandbox_starts, stderr, stdout, write};

fn airlock(h: &TestHome, args: &[&str]) -> Output {
    h.airlock(args)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("SHELL", "/bin/sh")
        .output()
        .expect("spawn airlock")
}

/// `sh -c script` in a sandbox without network.
fn sh(h: &TestHome, script: &str) -> Output {
    airlock(h, &["run", "--network", "none", "--", "sh", "-c", script])
}

fn config_file(h: &TestHome) -> String {
    h.home
        .join(".config/airlock/config.toml")
        .display()
        .to_string()
}

#[test]
fn hidden_pattern_matches_read_empty_and_other_files_stay() {
    if !sandbox_starts() {
        return;
    }
    let h = TestHome::new("home/code/app");
    write(&h.project.join("a.key"), "secret-a\n");
    write(&h.project.join("deep/er/b.key"), "secret-b\n");
    write(&h.project.join("notes.txt"), "visible\n");
    write(&h.project.join("keys.d/c.pem"), "not a key\n");
    h.config("[[sandbox.mounts]]\npattern = \"**/*.key\"\nmode = \"hidden\"\n");
    let out = sh(
        &h,
        "printf '[%s]' \"$(cat a.key)\" \"$(cat deep/er/b.key)\" \"$(cat notes.txt)\" \
         \"$(cat keys.d/c.pem)\"; echo; echo leak > a.key && echo written; true",
    );
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(
        stdout(&out),
        "[][][visible][not a key]\n",
        "matches read empty, the rest as on the host: {}",
        report(&out)
    );
    assert!(
        stderr(&out).contains("Read-only file system"),
        "a hidden file cannot be written: {}",
        report(&out)
    );
    assert_eq!(
        fs::read_to_string(h.project.join("a.key")).expect("host file"),
        "secret-a\n"
    );
}

#[test]
fn an_overlay_dir_keeps_writes_across_runs_and_never_on_the_host() {
    if !sandbox_starts() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let shared = h.home.join("shared");
    write(&shared.join("host.txt"), "host\n");
    h.config("[[sandbox.mounts]]\npath = \"~/shared\"\nmode = \"overlay\"\n");
    let out = sh(
        &h,
        "cat ~/shared/host.txt && echo changed > ~/shared/host.txt && \
         mkdir ~/shared/made && echo new > ~/shared/made/new.txt",
    );
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "host\n", "the host's content shows through");
    assert_eq!(
        fs::read_to_string(shared.join("host.txt")).expect("host file"),
        "host\n",
        "the host file is untouched"
    );
    assert!(!shared.join("made").exists(), "nothing new on the host");

    let out = sh(&h, "cat ~/shared/host.txt ~/shared/made/new.txt");
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "changed\nnew\n", "the writes came back");
    assert_eq!(
        fs::read_to_string(shared.join("host.txt")).expect("host file"),
        "host\n"
    );
}

#[test]
fn a_tmpoverlay_dir_forgets_its_writes_at_exit() {
    if !sandbox_starts() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let scratch = h.project.join("build/out");
    write(&scratch.join("host.txt"), "host\n");
    h.config("[[sandbox.mounts]]\npattern = \"build/*/\"\nmode = \"tmpoverlay\"\n");
    let out = sh(
        &h,
        "echo changed > build/out/host.txt && echo new > build/out/new.txt && \
         cat build/out/host.txt",
    );
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "changed\n", "writable inside");
    assert_eq!(
        fs::read_to_string(scratch.join("host.txt")).expect("host file"),
        "host\n",
        "the host file is untouched"
    );
    assert!(!scratch.join("new.txt").exists(), "nothing new on the host");

    let out = sh(&h, "cat build/out/host.txt; ls build/out");
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "host\nhost.txt\n", "the writes are gone");
}

#[test]
fn print_spec_names_the_rule_of_each_match_and_warns_about_an_empty_pattern() {
    let h = TestHome::new("home/code/app");
    write(&h.project.join("a.key"), "x");
    h.config(
        "[[sandbox.mounts]]\npattern = \"**/*.key\"\nmode = \"hidden\"\n\n\
         [[sandbox.mounts]]\npattern = \"**/*.pfx\"\nmode = \"hidden\"\n",
    );
    let out = airlock(&h, &["run", "--print-spec"]);
    assert!(out.status.success(), "{}", report(&out));
    let spec: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    let key = h.project.join("a.key").display().to_string();
    assert_eq!(
        spec["mount_origins"][&key],
        format!(
            "{}: [[sandbox.mounts]] #1 (pattern = \"**/*.key\", mode = \"hidden\")",
            config_file(&h)
        )
    );
    let masked = spec["mounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .any(|m| m["op"] == "mask-file" && m["target"] == key.as_str());
    assert!(masked, "{spec:#}");
    let warning = format!(
        "airlock: warning: {}: [[sandbox.mounts]] #2 (pattern = \"**/*.pfx\", mode = \"hidden\") \
         matched nothing under {}; nothing is mounted for it\n",
        config_file(&h),
        h.project.display()
    );
    assert!(stderr(&out).contains(&warning), "{}", report(&out));
    assert!(!h.sandboxes().exists(), "print-spec creates nothing");
}

#[test]
fn more_than_ten_thousand_matches_are_refused_before_anything_is_created() {
    let h = TestHome::new("home/code/app");
    let many = h.project.join("many");
    fs::create_dir_all(&many).expect("dir");
    for n in 0..10_001 {
        fs::write(many.join(format!("f{n}.key")), "").expect("file");
    }
    h.config("[[sandbox.mounts]]\npattern = \"**/*.key\"\nmode = \"hidden\"\n");
    let out = airlock(&h, &["run", "--network", "none", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains(&format!(
            "{}: [[sandbox.mounts]] #1 (pattern = \"**/*.key\", mode = \"hidden\") matches 10001 \
             paths under {}, more than the 10000 one pattern may mount; nothing was mounted or \
             created.",
            config_file(&h),
            h.project.display()
        )),
        "{}",
        report(&out)
    );
    assert!(!h.sandboxes().exists(), "no sandbox state was created");
}

#[test]
fn an_entry_with_both_path_and_pattern_is_a_config_error() {
    let h = TestHome::new("home/code/app");
    h.config("[[sandbox.mounts]]\npath = \"~/x\"\npattern = \"*.key\"\nmode = \"hidden\"\n");
    let out = airlock(&h, &["run", "--print-spec"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains(&format!(
            "{}: [[sandbox.mounts]] #1 gives both path \"~/x\" and pattern \"*.key\"; keep one",
            config_file(&h)
        )),
        "{}",
        report(&out)
    );
}

#[test]
fn an_overlay_on_a_file_is_refused_naming_the_entry() {
    let h = TestHome::new("home/code/app");
    write(&h.home.join("notes.txt"), "x");
    h.config("[[sandbox.mounts]]\npath = \"~/notes.txt\"\nmode = \"overlay\"\n");
    let out = airlock(&h, &["run", "--print-spec"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains(&format!(
            "{}: [[sandbox.mounts]] #1 (path = \"~/notes.txt\", mode = \"overlay\"): mode overlay \
             needs a directory, but {} is a file",
            config_file(&h),
            h.home.join("notes.txt").display()
        )),
        "{}",
        report(&out)
    );
}
