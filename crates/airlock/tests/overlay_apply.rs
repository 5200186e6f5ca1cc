//! `airlock overlay diff|apply` end to end: a real sandbox writes and deletes in an `overlay`
//! directory, `diff` lists it, `apply` without `--yes` changes nothing, `apply --yes` makes the
//! host match and empties the upper; and what a hostile sandbox leaves there (links to your
//! files, a symlinked host directory, FIFOs, devices, setuid files) never reaches the host, nor
//! does anything while a session runs. Each attack has its control.

mod common;

use std::fs;
use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::{TestHome, report, sandbox_starts, stderr, stdout, write};

const DATA_OVERLAY: &str = "[[sandbox.mounts]]\npath = \"~/data\"\nmode = \"overlay\"\n";

/// A home with `~/data` (a.txt, del.txt, gone/g.txt, sub/keep.txt) mounted as an overlay.
fn world() -> TestHome {
    let h = TestHome::new("home/code/app");
    let data = h.home.join("data");
    write(&data.join("a.txt"), "host\n");
    write(&data.join("del.txt"), "delete me\n");
    write(&data.join("gone/g.txt"), "in a deleted dir\n");
    write(&data.join("sub/keep.txt"), "keep\n");
    write(&h.home.join(".bashrc"), "precious\n");
    h.config(DATA_OVERLAY);
    h
}

/// `sh -c script` in a sandbox without network; asserts it succeeded.
fn sh(h: &TestHome, script: &str) -> Output {
    let out = h.run(&["run", "--network", "none", "--", "sh", "-c", script]);
    assert!(out.status.success(), "{}", report(&out));
    out
}

/// The upper dir of `~/data`'s overlay.
fn upper(h: &TestHome) -> PathBuf {
    find_upper(h).expect("the overlay of ~/data")
}

fn find_upper(h: &TestHome) -> Option<PathBuf> {
    let sandbox = fs::read_dir(h.sandboxes()).ok()?.next()?.ok()?.path();
    let overlay = fs::read_dir(sandbox.join("overlay"))
        .ok()?
        .filter_map(|e| Some(e.ok()?.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("mount-data-"))
        })?;
    Some(overlay.join("upper"))
}

/// Every entry below `dir`, relative, sorted, with a trailing `/` for directories.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            let rel = path
                .strip_prefix(root)
                .expect("below")
                .display()
                .to_string();
            if fs::symlink_metadata(&path).expect("lstat").is_dir() {
                out.push(format!("{rel}/"));
                walk(root, &path, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn diff_lists_what_a_sandbox_kept_and_apply_yes_brings_it_home() {
    if !sandbox_starts() {
        return;
    }
    let h = world();
    let data = h.home.join("data");
    sh(
        &h,
        "cd ~/data && echo changed > a.txt && rm del.txt && rm -r gone && mkdir -p new/x && \
         echo y > new/x/y && echo n > n.txt && ln n.txt hard && rm -r sub && mkdir sub && \
         echo fresh > sub/fresh.txt",
    );
    let d = data.display();
    let out = h.run(&["overlay", "diff"]);
    assert!(out.status.success(), "{}", report(&out));
    let text = stdout(&out);
    let listed: Vec<&str> = text.lines().skip(1).collect();
    let expected = [
        format!("  modified  {d}/a.txt"),
        format!("  deleted   {d}/del.txt"),
        format!("  deleted   {d}/gone/"),
        format!("  added     {d}/hard"),
        format!("  added     {d}/n.txt"),
        format!("  added     {d}/new/"),
        format!("  added     {d}/new/x/"),
        format!("  added     {d}/new/x/y"),
        format!("  added     {d}/sub/fresh.txt"),
        format!("  deleted   {d}/sub/keep.txt"),
        "10 change(s) in 1 overlay(s); `airlock overlay apply` shows what it would do, \
         `airlock overlay apply --yes` does it"
            .to_owned(),
    ];
    assert_eq!(listed, expected, "{}", report(&out));
    assert!(
        stdout(&out).starts_with(&format!(
            "[[sandbox.mounts]] {d} (kept in {}",
            upper(&h).display()
        )),
        "{}",
        report(&out)
    );

    let out = h.run(&["overlay", "diff", "--json"]);
    assert!(out.status.success(), "{}", report(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    let layer = &json.as_array().expect("an array")[0];
    assert_eq!(layer["tool"], serde_json::Value::Null);
    assert_eq!(layer["kind"], "dir");
    assert_eq!(layer["host"], d.to_string());
    assert_eq!(layer["error"], serde_json::Value::Null);
    assert_eq!(
        layer["changes"][0],
        serde_json::json!({"change": "modified", "type": "file", "path": format!("{d}/a.txt"),
            "inside": format!("{d}/a.txt"), "applies": true, "reason": null})
    );
    assert_eq!(layer["changes"].as_array().expect("changes").len(), 10);

    let (host_before, upper_before) = (tree(&data), tree(&upper(&h)));
    let out = h.run(&["overlay", "apply"]);
    assert!(out.status.success(), "a dry run exits 0: {}", report(&out));
    assert!(
        stdout(&out).contains(&format!("would update {d}/a.txt\n")),
        "{}",
        report(&out)
    );
    assert!(stdout(&out).contains("dry run: 10 change(s) would be applied; nothing was changed"));
    assert_eq!(
        tree(&data),
        host_before,
        "the dry run changed nothing on the host"
    );
    assert_eq!(tree(&upper(&h)), upper_before, "nor in the upper");
    assert_eq!(read(&data.join("a.txt")), "host\n");

    let out = h.run(&["overlay", "apply", "--yes"]);
    assert!(out.status.success(), "{}", report(&out));
    assert!(
        stdout(&out).ends_with("applied 10 change(s)\n"),
        "{}",
        report(&out)
    );
    assert_eq!(
        tree(&data),
        [
            "a.txt",
            "hard",
            "n.txt",
            "new/",
            "new/x/",
            "new/x/y",
            "sub/",
            "sub/fresh.txt"
        ]
    );
    assert_eq!(read(&data.join("a.txt")), "changed\n");
    assert_eq!(read(&data.join("new/x/y")), "y\n");
    assert_eq!(tree(&upper(&h)), Vec::<String>::new(), "the upper is empty");
    let out = h.run(&["overlay", "diff"]);
    assert!(stdout(&out).starts_with("no changes"), "{}", report(&out));

    // The overlay shows the host again: a change made on the host now is what the sandbox sees.
    fs::write(data.join("a.txt"), "host again\n").expect("host write");
    let out = sh(&h, "cat ~/data/a.txt ~/data/sub/fresh.txt");
    assert_eq!(stdout(&out), "host again\nfresh\n");
}

#[test]
fn a_tool_overlay_and_its_seeded_file_apply_by_tool_and_path() {
    if !sandbox_starts() {
        return;
    }
    let h = TestHome::new("home/code/app");
    write(&h.home.join(".claude/settings.json"), "{\"host\": true}\n");
    write(&h.home.join(".claude.json"), "{\"v\": 1}\n");
    fs::set_permissions(
        h.home.join(".claude.json"),
        fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    h.config("[tools.claude]\nmount_mode = \"overlay\"\n");
    sh(
        &h,
        "mkdir -p ~/.claude/projects && echo session > ~/.claude/projects/p.jsonl && \
         echo '{\"inside\": true}' > ~/.claude/settings.json && echo '{\"v\": 2}' > ~/.claude.json",
    );
    let claude = h.home.join(".claude");
    let projects = claude.join("projects");
    let out = h
        .run(&["overlay", "apply", "--yes", "--tool", "claude", "--path"])
        .status;
    assert!(!out.success(), "--path needs a value");
    let path = projects.display().to_string();
    let out = h.run(&[
        "overlay", "apply", "--yes", "--tool", "claude", "--path", &path,
    ]);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(read(&projects.join("p.jsonl")), "session\n");
    assert_eq!(
        read(&claude.join("settings.json")),
        "{\"host\": true}\n",
        "outside --path"
    );
    assert_eq!(
        read(&h.home.join(".claude.json")),
        "{\"v\": 1}\n",
        "outside --path"
    );

    let out = h.run(&["overlay", "apply", "--yes", "--tool", "claude"]);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(read(&claude.join("settings.json")), "{\"inside\": true}\n");
    assert_eq!(read(&h.home.join(".claude.json")), "{\"v\": 2}\n");
    let mode = fs::metadata(h.home.join(".claude.json"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the host file keeps its mode");
    let out = h.run(&["overlay", "diff", "--tool", "claude"]);
    assert!(stdout(&out).starts_with("no changes"), "{}", report(&out));

    let out = h.run(&["overlay", "diff", "--tool", "codex"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains("--tool codex: no overlay of that tool in the sandbox of")
            && stderr(&out).contains(&format!("it has claude {}", claude.display())),
        "{}",
        report(&out)
    );
    let out = h.run(&["overlay", "diff", "--path", "/etc"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains("--path /etc: not in any overlay"),
        "{}",
        report(&out)
    );
}

#[test]
fn links_planted_in_the_overlay_never_make_apply_write_outside_it() {
    if !sandbox_starts() {
        return;
    }
    let h = world();
    let data = h.home.join("data");
    let bashrc = h.home.join(".bashrc");
    let outside = h.home.join("outside");
    fs::create_dir(&outside).expect("outside");
    sh(
        &h,
        &format!(
            "cd ~/data && ln -s {} rc && ln -s ../../../../../../etc up && ln -s /root/.bashrc \
             root && ln -s {} outdir && echo control > ok.txt",
            bashrc.display(),
            outside.display()
        ),
    );
    let out = h.run(&["overlay", "apply", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "entries were left: {}",
        report(&out)
    );
    assert!(
        stdout(&out).contains(&format!(
            "left {}/rc: a symlink to {}: links are never copied out of a sandbox",
            data.display(),
            bashrc.display()
        )),
        "{}",
        report(&out)
    );
    for name in ["rc", "up", "root", "outdir"] {
        assert!(
            fs::symlink_metadata(data.join(name)).is_err(),
            "{name} is not on the host"
        );
        assert!(
            fs::symlink_metadata(upper(&h).join(name)).is_ok(),
            "{name} stays in the upper"
        );
    }
    assert_eq!(read(&bashrc), "precious\n");
    assert_eq!(fs::read_dir(&outside).expect("outside").count(), 0);
    assert_eq!(
        read(&data.join("ok.txt")),
        "control\n",
        "the control is applied"
    );
}

#[test]
fn a_host_directory_made_a_symlink_after_the_diff_is_not_written_through() {
    if !sandbox_starts() {
        return;
    }
    let h = world();
    let data = h.home.join("data");
    let outside = h.home.join("outside");
    fs::create_dir(&outside).expect("outside");
    sh(
        &h,
        "echo planted > ~/data/sub/new.txt && echo control > ~/data/ok.txt",
    );
    let out = h.run(&["overlay", "diff"]);
    assert!(
        stdout(&out).contains(&format!("added     {}/sub/new.txt", data.display())),
        "{}",
        report(&out)
    );
    // Between the diff and the apply the host's directory becomes a link to another of yours.
    fs::rename(data.join("sub"), h.home.join("sub-moved")).expect("move");
    symlink(&outside, data.join("sub")).expect("symlink");
    let out = h.run(&["overlay", "apply", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", report(&out));
    assert!(
        stdout(&out).contains(&format!(
            "left {}/sub/: on the host it is a symlink (to {}): airlock does not write through links",
            data.display(),
            outside.display()
        )),
        "{}",
        report(&out)
    );
    assert_eq!(
        fs::read_dir(&outside).expect("outside").count(),
        0,
        "nothing written there"
    );
    assert_eq!(
        read(&upper(&h).join("sub/new.txt")),
        "planted\n",
        "kept in the upper"
    );
    assert_eq!(
        read(&data.join("ok.txt")),
        "control\n",
        "the control is applied"
    );
}

#[test]
fn fifos_devices_and_setuid_files_are_never_recreated_on_the_host() {
    if !sandbox_starts() {
        return;
    }
    let h = world();
    let data = h.home.join("data");
    sh(
        &h,
        "cd ~/data && mkfifo fifo && cp /bin/true suid && chmod u+s suid && cp /bin/true sgid && \
         chmod g+s sgid && echo control > ok.txt && chmod 0640 ok.txt",
    );
    let mut planted = vec!["fifo", "suid", "sgid"];
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        // The sandbox cannot make a device (no CAP_MKNOD); an upper holding one is planted here.
        let node =
            std::ffi::CString::new(upper(&h).join("null").into_os_string().into_encoded_bytes())
                .expect("c path");
        // SAFETY: a valid C string; the numbers of /dev/null.
        let made =
            unsafe { libc::mknod(node.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
        assert_eq!(made, 0, "mknod");
        planted.push("null");
    } else {
        eprintln!("skipped the device part: planting a device node in the upper needs root");
    }
    let out = h.run(&["overlay", "apply", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", report(&out));
    let text = stdout(&out);
    let d = data.display();
    assert!(
        text.contains(&format!("left {d}/fifo: a FIFO: never created on the host")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "left {d}/suid: mode 4755 has the setuid or setgid bit"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "left {d}/sgid: mode 2755 has the setuid or setgid bit"
        )),
        "{text}"
    );
    if planted.contains(&"null") {
        assert!(
            text.contains(&format!("left {d}/null: a device node: never created")),
            "{text}"
        );
    }
    for name in planted {
        assert!(
            fs::symlink_metadata(data.join(name)).is_err(),
            "{name} is not on the host"
        );
        assert!(
            fs::symlink_metadata(upper(&h).join(name)).is_ok(),
            "{name} stays in the upper"
        );
    }
    assert_eq!(
        read(&data.join("ok.txt")),
        "control\n",
        "the control is applied"
    );
    let mode = fs::metadata(data.join("ok.txt"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o640, "with its mode");
}

#[test]
fn apply_is_refused_while_a_session_of_the_project_runs() {
    if !sandbox_starts() {
        return;
    }
    let h = world();
    let data = h.home.join("data");
    let mut session = h
        .airlock(&[
            "run",
            "--network",
            "none",
            "--",
            "sh",
            "-c",
            "echo during > ~/data/during.txt && while [ ! -e stop ]; do sleep 0.05; done",
        ])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the session");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !find_upper(&h).is_some_and(|u| u.join("during.txt").exists()) {
        if Instant::now() > deadline {
            let _ = session.kill();
            panic!("the session never wrote its file");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = h.run(&["overlay", "apply", "--yes"]);
    let refused = (out.status.code(), stderr(&out));
    let dry = h.run(&["overlay", "apply"]);
    write(&h.project.join("stop"), "");
    let status = session.wait().expect("wait for the session");
    assert!(status.success(), "the session ran: {status:?}");
    assert_eq!(refused.0, Some(125), "{}", report(&out));
    assert!(
        refused.1.contains(&format!(
            "a session of {} is running: its sandbox can still write the overlays, so nothing was applied; end it",
            h.project.display()
        )),
        "{}",
        report(&out)
    );
    assert!(dry.status.success(), "{}", report(&dry));
    assert!(stdout(&dry).contains("a session of this project is running: --yes is refused"));
    assert!(
        !data.join("during.txt").exists(),
        "nothing applied while it ran"
    );

    // The control: once it ended, the same command applies.
    let out = h.run(&["overlay", "apply", "--yes"]);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(read(&data.join("during.txt")), "during\n");
}
