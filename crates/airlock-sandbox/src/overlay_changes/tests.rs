//! The walk against hand-made uppers: what the kernel writes (whiteouts, opaque directories) and
//! what a hostile sandbox can leave there (links, FIFOs, devices, setuid files), each attack with
//! a control that shows the ordinary case still applies.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};

use super::*;

/// `(kind, path relative to the host root, reason)` of each change a walk reported.
type Seen = Vec<(String, String, String)>;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    upper: PathBuf,
    host: PathBuf,
    /// A directory of the user's the overlay must never reach.
    outside: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = fs::canonicalize(dir.path()).expect("canonical");
        let state = root.join("state");
        let upper = state.join("overlay/mount-data-12345678/upper");
        let host = root.join("home/data");
        let outside = root.join("home/outside");
        for d in [&upper, &host, &outside] {
            fs::create_dir_all(d).expect("dirs");
        }
        fs::write(outside.join("bashrc"), "precious\n").expect("outside file");
        Fixture {
            _dir: dir,
            root,
            state,
            upper,
            host,
            outside,
        }
    }

    fn layer(&self) -> Layer {
        Layer {
            tool: None,
            origin: "a test".into(),
            kind: LayerKind::Dir,
            host: self.host.clone(),
            inside: self.host.clone(),
            kept: self.upper.clone(),
        }
    }

    fn overlays(&self, layer: Layer) -> Overlays {
        Overlays {
            layers: vec![layer],
            state_root: self.state.clone(),
            writable: vec![self.state.clone()],
            // SAFETY: geteuid cannot fail.
            uid: unsafe { libc::geteuid() },
        }
    }

    /// What a walk of the layer reported, and its summary.
    fn walk(&self, action: Action, scope: &Scope) -> (Seen, Summary) {
        self.walk_layer(self.layer(), action, scope)
            .expect("the layer can be walked")
    }

    fn walk_layer(
        &self,
        layer: Layer,
        action: Action,
        scope: &Scope,
    ) -> Result<(Seen, Summary), OverlayError> {
        let overlays = self.overlays(layer.clone());
        let mut seen = Vec::new();
        let summary = overlays.walk(&layer, scope, action, &mut |c| {
            let rel = c.host.strip_prefix(&layer.host).unwrap_or(&c.host);
            seen.push((
                format!("{} {}", c.kind.as_str(), c.entry.as_str()),
                rel.display().to_string(),
                c.refused
                    .as_ref()
                    .map(|r| r.to_string())
                    .unwrap_or_default(),
            ));
        })?;
        Ok((seen, summary))
    }

    fn changes(&self) -> Vec<(String, String)> {
        let (seen, _) = self.walk(Action::Show, &Scope::all());
        seen.into_iter().map(|(k, p, _)| (k, p)).collect()
    }

    fn upper_names(&self) -> Vec<String> {
        let mut names: Vec<String> = walkdir(&self.upper)
            .into_iter()
            .map(|p| p.strip_prefix(&self.upper).unwrap().display().to_string())
            .collect();
        names.sort();
        names
    }
}

fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if fs::symlink_metadata(&path).unwrap().is_dir() {
            out.extend(walkdir(&path));
        }
        out.push(path);
    }
    out
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).expect("parent");
    fs::write(path, text).expect("write");
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn c(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap()
}

/// What overlayfs leaves for a deleted entry: a character device 0:0 (no CAP_MKNOD needed).
fn whiteout(path: &Path) {
    // SAFETY: valid C string.
    let ret = unsafe { libc::mknod(c(path).as_ptr(), libc::S_IFCHR, 0) };
    assert_eq!(ret, 0, "mknod whiteout {}", path.display());
}

/// What overlayfs sets on a directory that replaced the lower's (a user-namespace mount).
fn opaque(path: &Path) {
    let name = c(Path::new("user.overlay.opaque"));
    // SAFETY: valid C strings and a buffer of the length passed.
    let ret =
        unsafe { libc::setxattr(c(path).as_ptr(), name.as_ptr(), b"y".as_ptr().cast(), 1, 0) };
    assert_eq!(ret, 0, "setxattr {}", path.display());
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, p)| ((*k).to_owned(), (*p).to_owned()))
        .collect()
}

#[test]
fn additions_modifications_and_deletions_are_listed_then_applied_and_dropped_from_the_upper() {
    let fx = Fixture::new();
    let (h, u) = (&fx.host, &fx.upper);
    write(&h.join("a.txt"), "host\n");
    write(&u.join("a.txt"), "changed\n");
    write(&h.join("same.txt"), "same\n");
    write(&u.join("same.txt"), "same\n");
    write(&h.join("del.txt"), "bye\n");
    whiteout(&u.join("del.txt"));
    write(&h.join("gone/deep/g.txt"), "bye\n");
    whiteout(&u.join("gone"));
    whiteout(&u.join("stale"));
    write(&h.join("repl/old"), "old\n");
    write(&u.join("repl/new"), "new\n");
    opaque(&u.join("repl"));
    fs::create_dir_all(h.join("was-dir/x")).unwrap();
    write(&u.join("was-dir"), "now a file\n");
    write(&u.join("newdir/x/y"), "y\n");
    fs::set_permissions(u.join("newdir/x"), fs::Permissions::from_mode(0o750)).unwrap();
    let listed = pairs(&[
        ("modified file", "a.txt"),
        ("deleted file", "del.txt"),
        ("deleted dir", "gone"),
        ("added dir", "newdir"),
        ("modified file", "was-dir"),
        ("added dir", "newdir/x"),
        ("added file", "newdir/x/y"),
        ("added file", "repl/new"),
        ("deleted file", "repl/old"),
    ]);
    assert_eq!(fx.changes(), listed);

    let (seen, summary) = fx.walk(Action::Apply, &Scope::all());
    assert_eq!(
        summary,
        Summary {
            changes: 9,
            refused: 0
        },
        "{seen:?}"
    );
    assert_eq!(read(&h.join("a.txt")), "changed\n");
    assert_eq!(read(&h.join("same.txt")), "same\n");
    assert!(!h.join("del.txt").exists() && !h.join("gone").exists());
    assert_eq!(read(&h.join("repl/new")), "new\n");
    assert!(!h.join("repl/old").exists());
    assert_eq!(read(&h.join("was-dir")), "now a file\n");
    assert_eq!(read(&h.join("newdir/x/y")), "y\n");
    let mode = fs::metadata(h.join("newdir/x"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o750, "a new directory keeps its mode");
    assert_eq!(
        fx.upper_names(),
        Vec::<String>::new(),
        "everything applied left the upper"
    );
    let temps: Vec<_> = walkdir(h)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(".airlock-apply"))
        .collect();
    assert!(temps.is_empty(), "no temp file left: {temps:?}");
    assert_eq!(fx.changes(), Vec::new(), "the host matches");
}

#[test]
fn a_symlink_in_the_upper_is_never_followed_or_copied() {
    let fx = Fixture::new();
    let u = &fx.upper;
    symlink(fx.outside.join("bashrc"), u.join("bashrc")).unwrap();
    symlink("../../../../../../etc", u.join("up")).unwrap();
    symlink(&fx.outside, u.join("dirlink")).unwrap();
    write(&u.join("ok.txt"), "control\n");
    let (seen, summary) = fx.walk(Action::Apply, &Scope::all());
    assert_eq!(summary.refused, 3, "{seen:?}");
    let bashrc = seen.iter().find(|(_, p, _)| p == "bashrc").expect("listed");
    assert_eq!(bashrc.0, "added symlink");
    assert!(
        bashrc.2.contains("links are never copied") && bashrc.2.contains("/home/outside/bashrc"),
        "{bashrc:?}"
    );
    for name in ["bashrc", "up", "dirlink"] {
        assert!(
            fs::symlink_metadata(fx.host.join(name)).is_err(),
            "{name} not on the host"
        );
        assert!(
            fs::symlink_metadata(u.join(name)).is_ok(),
            "{name} stays in the upper"
        );
    }
    assert_eq!(read(&fx.outside.join("bashrc")), "precious\n");
    assert_eq!(
        fs::read_dir(&fx.outside).unwrap().count(),
        1,
        "nothing new outside"
    );
    assert_eq!(
        read(&fx.host.join("ok.txt")),
        "control\n",
        "the control is applied"
    );
}

#[test]
fn a_host_directory_swapped_for_a_symlink_after_the_diff_is_not_written_through() {
    let fx = Fixture::new();
    fs::create_dir(fx.host.join("sub")).unwrap();
    write(&fx.upper.join("sub/f"), "planted\n");
    write(&fx.upper.join("other/f"), "control\n");
    fs::create_dir(fx.host.join("other")).unwrap();
    assert_eq!(
        fx.changes(),
        pairs(&[("added file", "other/f"), ("added file", "sub/f")])
    );
    fs::remove_dir(fx.host.join("sub")).unwrap();
    symlink(&fx.outside, fx.host.join("sub")).unwrap();
    let (seen, summary) = fx.walk(Action::Apply, &Scope::all());
    assert_eq!(
        summary,
        Summary {
            changes: 2,
            refused: 1
        },
        "{seen:?}"
    );
    let sub = seen
        .iter()
        .find(|(_, p, _)| p == "sub")
        .expect("the link is named");
    assert!(
        sub.2.contains("symlink") && sub.2.contains("does not write through"),
        "{sub:?}"
    );
    assert!(
        !fx.outside.join("f").exists(),
        "nothing written through the link"
    );
    assert_eq!(
        read(&fx.upper.join("sub/f")),
        "planted\n",
        "kept in the upper"
    );
    assert_eq!(read(&fx.host.join("other/f")), "control\n");
}

#[test]
fn a_host_file_that_is_a_symlink_is_replaced_never_written_through() {
    let fx = Fixture::new();
    symlink(fx.outside.join("bashrc"), fx.host.join("rc")).unwrap();
    write(&fx.upper.join("rc"), "from the sandbox\n");
    let (seen, summary) = fx.walk(Action::Apply, &Scope::all());
    assert_eq!(summary.refused, 0, "{seen:?}");
    assert_eq!(read(&fx.outside.join("bashrc")), "precious\n");
    let meta = fs::symlink_metadata(fx.host.join("rc")).unwrap();
    assert!(meta.is_file(), "the link itself was replaced");
    assert_eq!(read(&fx.host.join("rc")), "from the sandbox\n");
}

#[test]
fn a_lower_dir_reached_through_a_symlink_is_refused_whole() {
    let fx = Fixture::new();
    write(&fx.upper.join("f"), "x\n");
    let link = fx.root.join("home/data-link");
    symlink(&fx.outside, &link).unwrap();
    let mut layer = fx.layer();
    layer.host = link;
    let e = fx
        .walk_layer(layer, Action::Apply, &Scope::all())
        .expect_err("the root is a link");
    assert!(e.to_string().contains("without following a symlink"), "{e}");
    assert!(!fx.outside.join("f").exists());
}

#[test]
fn a_link_the_sandbox_could_have_planted_on_the_way_to_a_layer_refuses_it() {
    let fx = Fixture::new();
    let project = fx.root.join("home/code/app");
    fs::create_dir_all(&project).unwrap();
    // ~/datasets -> the project's data dir, which a session replaced by a link to ~/outside.
    symlink(project.join("data"), fx.root.join("home/datasets")).unwrap();
    symlink(&fx.outside, project.join("data")).unwrap();
    let writable = [project.clone()];
    let named = fx.root.join("home/datasets/sub");
    assert_eq!(
        route::planted_link(&named, &writable),
        Some(project.join("data"))
    );
    // The control: the same way with a real directory in the project, and a link of the user's.
    fs::remove_file(project.join("data")).unwrap();
    fs::create_dir(project.join("data")).unwrap();
    assert_eq!(route::planted_link(&named, &writable), None);

    let mut overlays = fx.overlays(fx.layer());
    overlays.writable.push(project.clone());
    let mut layer = fx.layer();
    layer.inside = fx.root.join("home/datasets");
    fs::remove_dir(project.join("data")).unwrap();
    symlink(&fx.outside, project.join("data")).unwrap();
    let e = overlays
        .walk(&layer, &Scope::all(), Action::Apply, &mut |_| {})
        .expect_err("refused");
    assert!(e.to_string().contains("may have planted it"), "{e}");
}

#[test]
fn fifos_sockets_devices_and_setid_files_stay_in_the_upper() {
    let fx = Fixture::new();
    let u = &fx.upper;
    // SAFETY: valid C string.
    assert_eq!(
        unsafe { libc::mkfifo(c(&u.join("fifo")).as_ptr(), 0o644) },
        0
    );
    let _socket = std::os::unix::net::UnixListener::bind(u.join("sock")).unwrap();
    write(&u.join("suid"), "#!/bin/sh\n");
    fs::set_permissions(u.join("suid"), fs::Permissions::from_mode(0o4755)).unwrap();
    write(&u.join("sgid"), "#!/bin/sh\n");
    fs::set_permissions(u.join("sgid"), fs::Permissions::from_mode(0o2755)).unwrap();
    let mut expected = 4;
    if is_root() {
        // SAFETY: valid C string; /dev/null's numbers.
        let ret = unsafe {
            libc::mknod(
                c(&u.join("null")).as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(1, 3),
            )
        };
        assert_eq!(ret, 0);
        expected += 1;
    } else {
        eprintln!("skipped the device node part: making one needs root");
    }
    write(&u.join("plain"), "control\n");
    fs::set_permissions(u.join("plain"), fs::Permissions::from_mode(0o1755)).unwrap();
    let (seen, summary) = fx.walk(Action::Apply, &Scope::all());
    assert_eq!(summary.refused, expected, "{seen:?}");
    for (name, why) in [
        ("fifo", "a FIFO: never created"),
        ("sock", "a socket: never created"),
        ("suid", "setuid or setgid"),
        ("sgid", "setuid or setgid"),
    ] {
        let entry = seen.iter().find(|(_, p, _)| p == name).expect(name);
        assert!(entry.2.contains(why), "{entry:?}");
        assert!(fs::symlink_metadata(fx.host.join(name)).is_err(), "{name}");
        assert!(fs::symlink_metadata(u.join(name)).is_ok(), "{name} stays");
    }
    assert!(fs::symlink_metadata(fx.host.join("null")).is_err());
    let mode = fs::metadata(fx.host.join("plain"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o7777,
        0o755,
        "the control is copied, its sticky bit dropped"
    );
}

#[test]
fn files_of_other_owners_are_neither_copied_nor_replaced_nor_deleted() {
    if !is_root() {
        eprintln!("skipped: giving a file to another uid needs root");
        return;
    }
    let fx = Fixture::new();
    let chown = |p: &Path| std::os::unix::fs::lchown(p, Some(12345), Some(12345)).unwrap();
    write(&fx.upper.join("theirs"), "x\n");
    chown(&fx.upper.join("theirs"));
    write(&fx.host.join("host-theirs"), "keep\n");
    chown(&fx.host.join("host-theirs"));
    write(&fx.upper.join("host-theirs"), "replace\n");
    write(&fx.host.join("delete-theirs"), "keep\n");
    chown(&fx.host.join("delete-theirs"));
    whiteout(&fx.upper.join("delete-theirs"));
    write(&fx.upper.join("mine"), "control\n");
    let (seen, summary) = fx.walk(Action::Apply, &Scope::all());
    assert_eq!(
        summary,
        Summary {
            changes: 4,
            refused: 3
        },
        "{seen:?}"
    );
    assert!(!fx.host.join("theirs").exists());
    assert_eq!(read(&fx.host.join("host-theirs")), "keep\n");
    assert_eq!(read(&fx.host.join("delete-theirs")), "keep\n");
    assert!(
        seen.iter()
            .any(|(_, p, r)| p == "theirs" && r.contains("uid 12345"))
    );
    assert_eq!(read(&fx.host.join("mine")), "control\n");
}

#[test]
fn hard_links_are_copied_as_separate_files() {
    let fx = Fixture::new();
    write(&fx.upper.join("a"), "shared\n");
    fs::hard_link(fx.upper.join("a"), fx.upper.join("b")).unwrap();
    fx.walk(Action::Apply, &Scope::all());
    for name in ["a", "b"] {
        let meta = fs::metadata(fx.host.join(name)).unwrap();
        assert_eq!(meta.nlink(), 1, "{name} is a file of its own");
        assert_eq!(read(&fx.host.join(name)), "shared\n");
    }
}

#[test]
fn a_scope_applies_only_what_lies_under_its_path() {
    let fx = Fixture::new();
    write(&fx.upper.join("newdir/x/y"), "y\n");
    write(&fx.upper.join("newdir/z"), "z\n");
    write(&fx.upper.join("top"), "t\n");
    let scope = Scope::under(fx.host.join("newdir/x"));
    let (seen, _) = fx.walk(Action::Apply, &scope);
    let seen: Vec<_> = seen.into_iter().map(|(k, p, _)| (k, p)).collect();
    assert_eq!(
        seen,
        pairs(&[
            ("added dir", "newdir"),
            ("added dir", "newdir/x"),
            ("added file", "newdir/x/y")
        ])
    );
    assert_eq!(read(&fx.host.join("newdir/x/y")), "y\n");
    assert!(!fx.host.join("newdir/z").exists() && !fx.host.join("top").exists());
    assert_eq!(fx.upper_names(), ["newdir", "newdir/z", "top"]);

    let (seen, _) = fx.walk(
        Action::Apply,
        &Scope::under(fx.host.join("newdir/nothing/here")),
    );
    assert_eq!(seen, Vec::new(), "nothing matched, nothing made");
    assert!(!fx.host.join("newdir/nothing").exists());
}

#[test]
fn a_tree_deeper_than_the_walk_goes_is_refused_below_the_limit() {
    let fx = Fixture::new();
    let mut deep = fx.upper.clone();
    for _ in 0..fsops::MAX_DEPTH + 4 {
        deep.push("d");
    }
    write(&deep.join("f"), "deep\n");
    write(&fx.upper.join("d/near"), "near\n");
    let (seen, summary) = fx.walk(Action::Apply, &Scope::all());
    assert_eq!(
        summary.refused,
        1,
        "{:?}",
        seen.iter().filter(|s| !s.2.is_empty()).collect::<Vec<_>>()
    );
    assert!(
        seen.iter()
            .any(|(_, _, r)| r.contains("levels of directories"))
    );
    assert_eq!(read(&fx.host.join("d/near")), "near\n");
}

#[test]
fn many_files_are_walked_one_directory_at_a_time() {
    let fx = Fixture::new();
    for d in 0..4 {
        for f in 0..1000 {
            write(&fx.upper.join(format!("d{d}/f{f}")), "x");
        }
    }
    let (_, summary) = fx.walk(Action::Apply, &Scope::all());
    assert_eq!(
        summary,
        Summary {
            changes: 4 * 1001,
            refused: 0
        }
    );
    assert_eq!(fs::read_dir(fx.host.join("d3")).unwrap().count(), 1000);
    assert_eq!(fx.upper_names(), Vec::<String>::new());
}

#[test]
fn a_seeded_file_is_compared_with_the_host_and_copied_keeping_the_hosts_mode() {
    let fx = Fixture::new();
    let host = fx.root.join("home/.tool.json");
    write(&host, "{\"v\": 1}\n");
    fs::set_permissions(&host, fs::Permissions::from_mode(0o600)).unwrap();
    let copy = fx.state.join("files/tool-.tool.json-12345678");
    write(&copy, "{\"v\": 1}\n");
    let layer = Layer {
        kind: LayerKind::File,
        host: host.clone(),
        inside: host.clone(),
        kept: copy.clone(),
        ..fx.layer()
    };
    let show = |fx: &Fixture| {
        fx.walk_layer(layer.clone(), Action::Show, &Scope::all())
            .unwrap()
            .0
    };
    assert_eq!(show(&fx), Vec::new(), "the same bytes: no change");
    write(&copy, "{\"v\": 2}\n");
    assert_eq!(
        show(&fx),
        vec![("modified file".into(), String::new(), String::new())]
    );
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o4644)).unwrap();
    let (seen, _) = fx
        .walk_layer(layer.clone(), Action::Apply, &Scope::all())
        .unwrap();
    assert!(seen[0].2.contains("setuid"), "{seen:?}");
    assert_eq!(read(&host), "{\"v\": 1}\n");
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o644)).unwrap();
    let (seen, summary) = fx
        .walk_layer(layer.clone(), Action::Apply, &Scope::all())
        .unwrap();
    assert_eq!(summary.refused, 0, "{seen:?}");
    assert_eq!(read(&host), "{\"v\": 2}\n");
    let mode = fs::metadata(&host).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the host file keeps its mode");
    assert!(
        !copy.exists(),
        "the next launch seeds it from the host again"
    );
}

#[test]
fn an_upper_that_does_not_exist_yet_has_no_changes() {
    let fx = Fixture::new();
    fs::remove_dir_all(&fx.state).unwrap();
    let (seen, summary) = fx.walk(Action::Apply, &Scope::all());
    assert_eq!((seen, summary), (Vec::new(), Summary::default()));
}
