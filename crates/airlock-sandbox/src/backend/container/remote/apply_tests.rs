//! The apply step on its own: what the host keeps when it changed during the session, what is
//! deleted (only what was sent), what a guard keeps, and a link planted on the host after the
//! send that the apply must not write through.

use std::path::{Path, PathBuf};

use super::apply::apply;
use super::send::{self, Exclusions};

struct Case {
    _dir: tempfile::TempDir,
    root: PathBuf,
    project: PathBuf,
    staging: PathBuf,
}

/// A project with `files`, sent (the manifest kept), and a staging copy of it as sent.
fn case(files: &[(&str, &str)]) -> (Case, send::Sent) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let project = root.join("p");
    let staging = root.join("back");
    for (name, body) in files {
        for base in [&project, &staging] {
            let path = base.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
    }
    std::fs::create_dir_all(&staging).unwrap();
    let ex = Exclusions {
        rules: crate::hide::Rules::new(&[".env".into()]).unwrap(),
        paths: Vec::new(),
        substitutes: Default::default(),
    };
    let sent =
        send::write_tree(&project, Path::new(""), &[], &ex, (0, 0), std::io::sink()).unwrap();
    let c = Case {
        _dir: dir,
        root,
        project,
        staging,
    };
    (c, sent)
}

fn no_guard(_: &Path) -> Option<&'static str> {
    None
}

#[test]
fn a_file_changed_here_during_the_session_is_kept_and_the_containers_copy_named() {
    let (c, sent) = case(&[("a.txt", "sent\n"), ("b.txt", "sent\n")]);
    std::fs::write(c.staging.join("a.txt"), "container\n").unwrap();
    std::fs::write(c.staging.join("b.txt"), "container\n").unwrap();
    std::fs::write(c.project.join("a.txt"), "edited here\n").unwrap();
    let done = apply(&c.project, &c.staging, &sent, &no_guard).unwrap();
    assert_eq!(
        std::fs::read_to_string(c.project.join("a.txt")).unwrap(),
        "edited here\n"
    );
    assert!(
        done.kept.iter().any(|(p, _)| p == Path::new("a.txt")),
        "{done:?}"
    );
    // Control: the file not touched here takes the container's version.
    assert_eq!(
        std::fs::read_to_string(c.project.join("b.txt")).unwrap(),
        "container\n"
    );
}

#[test]
fn only_what_was_sent_is_deleted_and_a_guarded_path_is_never_written() {
    let (c, sent) = case(&[("gone.txt", "x"), ("keep/.env", "SECRET=1")]);
    std::fs::remove_file(c.staging.join("gone.txt")).unwrap();
    // Created here after the send: not in the container's copy, and not the container's to delete.
    std::fs::write(c.project.join("new-here.txt"), "mine").unwrap();
    std::fs::write(c.staging.join("keep/.env"), "SECRET=container").unwrap();
    let guard = |rel: &Path| (rel.file_name() == Some(".env".as_ref())).then_some("hidden");
    let done = apply(&c.project, &c.staging, &sent, &guard).unwrap();
    assert!(!c.project.join("gone.txt").exists(), "{done:?}");
    assert_eq!(
        std::fs::read_to_string(c.project.join("new-here.txt")).unwrap(),
        "mine"
    );
    assert_eq!(
        std::fs::read_to_string(c.project.join("keep/.env")).unwrap(),
        "SECRET=1"
    );
    assert!(
        done.refused
            .iter()
            .any(|(p, _)| p == Path::new("keep/.env")),
        "{done:?}"
    );
}

#[test]
fn a_link_planted_here_after_the_send_is_not_written_through() {
    let (c, sent) = case(&[("sub/f.txt", "sent\n")]);
    let outside = c.root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // The host's `sub` swapped for a link to a directory outside the project.
    std::fs::remove_dir_all(c.project.join("sub")).unwrap();
    std::os::unix::fs::symlink(&outside, c.project.join("sub")).unwrap();
    std::fs::write(c.staging.join("sub/f.txt"), "container\n").unwrap();
    std::fs::write(c.staging.join("sub/new.txt"), "container\n").unwrap();
    let done = apply(&c.project, &c.staging, &sent, &no_guard).unwrap();
    assert!(
        std::fs::read_dir(&outside).unwrap().next().is_none(),
        "wrote through: {done:?}"
    );
    assert!(
        std::fs::symlink_metadata(c.project.join("sub"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}
