use super::*;

fn small(max_bytes: u64, files: usize) -> Rotation {
    Rotation { max_bytes, files }
}

fn lines_of(path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    read(path, |line| {
        out.push(String::from_utf8_lossy(line).into_owned())
    })
    .unwrap();
    out
}

#[test]
fn rotates_at_the_cap_keeping_the_newest_files_and_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut log = RotatingFile::open(&path, small(100, 2)).unwrap();
    for n in 0..20 {
        log.append(format!("line {n:02} {}\n", "x".repeat(20)).as_bytes())
            .unwrap();
    }
    // 29-byte lines: three per 100-byte file; 20 lines fill 7 files, of which 3 are kept.
    for file in [path.clone(), numbered(&path, 1), numbered(&path, 2)] {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.len() <= 100 && text.ends_with('\n'),
            "{file:?}: {text:?}"
        );
    }
    assert!(!numbered(&path, 3).exists());
    let lines = lines_of(&path);
    let first: Vec<&str> = lines.iter().map(|l| &l[..7]).collect();
    assert_eq!(
        first,
        [
            "line 12", "line 13", "line 14", "line 15", "line 16", "line 17", "line 18", "line 19"
        ]
    );
}

#[test]
fn a_batch_is_split_at_a_line_boundary_and_a_huge_line_gets_a_file_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut log = RotatingFile::open(&path, small(10, 3)).unwrap();
    log.append(b"aaaa\nbbbb\ncccc\n").unwrap();
    log.append(format!("{}\nd\n", "h".repeat(30)).as_bytes())
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(numbered(&path, 3)).unwrap(),
        "aaaa\nbbbb\n"
    );
    assert_eq!(
        std::fs::read_to_string(numbered(&path, 2)).unwrap(),
        "cccc\n"
    );
    assert_eq!(
        std::fs::read_to_string(numbered(&path, 1)).unwrap(),
        format!("{}\n", "h".repeat(30))
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "d\n");
}

#[test]
fn a_half_written_line_is_ended_before_new_lines_and_the_mode_is_0600() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/log");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "whole\n{\"half\":").unwrap();
    let mut log = RotatingFile::open(&path, Rotation::default()).unwrap();
    log.append(b"next\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "whole\n{\"half\":\nnext\n"
    );
    assert_eq!(lines_of(&path), ["whole", "{\"half\":", "next"]);
    let fresh = dir.path().join("new/dir/log");
    RotatingFile::open(&fresh, Rotation::default()).unwrap();
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn a_symlink_is_never_opened() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::write(&target, "").unwrap();
    let path = dir.path().join("log");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    assert!(RotatingFile::open(&path, Rotation::default()).is_err());
    assert!(read(&path, |_| {}).is_err());
}

#[test]
fn the_tail_goes_on_after_the_last_whole_line_and_across_rotations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    std::fs::write(numbered(&path, 1), "old\nunfinished").unwrap();
    std::fs::write(&path, "one\ntw").unwrap();
    let mut seen = Vec::new();
    let mut tail = read(&path, |l| {
        seen.push(String::from_utf8_lossy(l).into_owned())
    })
    .unwrap();
    // A rotated file's last line is read even unfinished; the current file's waits.
    assert_eq!(seen, ["old", "unfinished", "one"]);
    let poll = |tail: &mut Tail| {
        let mut more = Vec::new();
        tail.poll(|l| more.push(String::from_utf8_lossy(l).into_owned()))
            .unwrap();
        more
    };
    let mut log = RotatingFile::open(&path, small(12, 3)).unwrap();
    // open() ended the half line "tw"; "three" no longer fits, so the file rotates first.
    log.append(b"three\nfour\n").unwrap();
    let mut more = poll(&mut tail);
    log.append(b"five\n").unwrap();
    more.extend(poll(&mut tail));
    assert_eq!(more, ["tw", "three", "four", "five"]);
    // A log cut short (replaced in place) is read again from its start.
    std::fs::write(&path, "x\n").unwrap();
    let more = poll(&mut tail);
    assert_eq!(more, ["x"]);
}

#[test]
fn a_missing_log_has_no_files_and_a_tail_that_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    assert!(files_oldest_first(&path).is_empty());
    let mut tail = read(&path, |_| panic!("no lines")).unwrap();
    std::fs::write(&path, "late\n").unwrap();
    let mut seen = Vec::new();
    tail.poll(|l| seen.push(l.to_vec())).unwrap();
    assert_eq!(seen, [b"late".to_vec()]);
}
