use std::os::unix::fs::PermissionsExt as _;

use super::*;

/// A `PATH` directory holding what a lookup must tell apart, padded with `extra` empty files.
fn path_dir(root: &Path, name: &str, extra: usize) -> PathBuf {
    let dir = root.join(name);
    fs::create_dir(&dir).expect("dir");
    let write = |file: &str, mode: u32| {
        let path = dir.join(file);
        fs::write(&path, "#!/bin/sh\n").expect("write");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
    };
    write("prog", 0o755);
    write("plain", 0o644);
    std::os::unix::fs::symlink("prog", dir.join("link")).expect("link");
    std::os::unix::fs::symlink("nowhere", dir.join("dangling")).expect("dangling");
    fs::create_dir(dir.join("subdir")).expect("subdir");
    for i in 0..extra {
        fs::write(
            dir.join(format!("padding-file-with-a-long-name-{i:04}")),
            "",
        )
        .expect("pad");
    }
    dir
}

#[test]
fn a_listed_path_directory_finds_what_a_looked_up_one_finds() {
    let root = tempfile::tempdir().expect("tempdir");
    let small = path_dir(root.path(), "small", 0);
    // Past LISTED_DIR_BYTES on ext4 (32-byte+ entries) and on tmpfs (20 bytes an entry).
    let large = path_dir(root.path(), "large", 600);
    for (dir, listed) in [(&small, true), (&large, false)] {
        let env = BTreeMap::from([("PATH".to_owned(), dir.display().to_string())]);
        let view = HostView::new(root.path(), env);
        assert_eq!(
            view.path_dirs()[0].names.is_some(),
            listed,
            "{}",
            dir.display()
        );
        assert_eq!(view.find_binary("prog"), Some(dir.join("prog")));
        assert_eq!(view.find_binary("link"), Some(dir.join("link")));
        for missing in ["plain", "dangling", "subdir", "absent", ".", ".."] {
            assert_eq!(
                view.find_binary(missing),
                None,
                "{missing} in {}",
                dir.display()
            );
        }
    }
}

#[test]
fn a_program_added_to_a_listed_directory_is_found_by_the_next_view() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = path_dir(root.path(), "bin", 0);
    let env = BTreeMap::from([("PATH".to_owned(), dir.display().to_string())]);
    assert_eq!(
        HostView::new(root.path(), env.clone()).find_binary("late"),
        None
    );
    let late = dir.join("late");
    fs::write(&late, "#!/bin/sh\n").expect("late");
    fs::set_permissions(&late, fs::Permissions::from_mode(0o755)).expect("chmod");
    assert_eq!(
        HostView::new(root.path(), env).find_binary("late"),
        Some(late)
    );
}

#[test]
fn a_directory_named_twice_in_path_is_looked_in_once() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = path_dir(root.path(), "usr-bin", 600);
    let alias = root.path().join("bin");
    std::os::unix::fs::symlink(&dir, &alias).expect("alias");
    let path = format!("{}:{}", dir.display(), alias.display());
    let view = HostView::new(root.path(), BTreeMap::from([("PATH".to_owned(), path)]));
    let dirs = view.path_dirs();
    assert_eq!((dirs[0].same_as, dirs[1].same_as), (None, Some(0)));
    assert_eq!(view.find_binary("prog"), Some(dir.join("prog")));
    assert_eq!(view.find_binary("absent"), None);
}

#[test]
fn an_untrusted_entry_does_not_hide_the_same_directory_named_later() {
    let root = tempfile::tempdir().expect("tempdir");
    let project = root.path().join("project");
    fs::create_dir(&project).expect("project");
    let dir = path_dir(root.path(), "usr-bin", 0);
    // The project's entry comes first and is the same directory: it is skipped as untrusted,
    // and the later, trusted entry is still looked in.
    let planted = project.join("bin");
    std::os::unix::fs::symlink(&dir, &planted).expect("planted");
    let path = format!("{}:{}", planted.display(), dir.display());
    let view = HostView::new(root.path(), BTreeMap::from([("PATH".to_owned(), path)]));
    assert_eq!(view.path_dirs()[1].same_as, Some(0));
    assert_eq!(
        view.find_host_program("prog", &project),
        Some(dir.join("prog"))
    );
    assert_eq!(view.find_binary("prog"), Some(planted.join("prog")));
}
