use super::*;

struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new(files: &[&str]) -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        for f in files {
            let path = root.join(f);
            if let Some(dir) = f.strip_suffix('/') {
                fs::create_dir_all(root.join(dir)).unwrap();
            } else {
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(&path, f).unwrap();
            }
        }
        Tree { _dir: dir, root }
    }

    fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    fn project(&self) -> PathBuf {
        self.root.join("home/code/app")
    }

    fn expand(&self, pattern: &str) -> PatternMatches {
        expand(pattern, &self.home(), &self.project(), &self.limits())
    }

    fn limits(&self) -> WalkLimits {
        WalkLimits {
            skip: vec![self.root.join("home/.local/share/airlock")],
            deadline: WALK_DEADLINE,
        }
    }

    /// The matches' targets relative to the root, with a `/` after directories.
    fn found(&self, m: &PatternMatches) -> Vec<String> {
        m.matches
            .iter()
            .map(|s| {
                let rel = s.path.strip_prefix(&self.root).unwrap().display();
                match s.kind {
                    PathKind::Dir => format!("{rel}/"),
                    _ => rel.to_string(),
                }
            })
            .collect()
    }
}

const APP: &[&str] = &[
    "home/code/app/a.key",
    "home/code/app/notes.txt",
    "home/code/app/deep/er/b.key",
    "home/code/app/.git/c.key",
    "home/code/app/sub/.git/d.key",
    "home/code/app/secrets/x",
    "home/code/app/secrets/y/z",
    "home/code/app/lib/secrets/w",
    "home/code/app/cache/",
    "home/.config/gh/token",
    "home/.config/glab/token",
    "home/.config/glab/other",
    "home/.config/airlock/token",
    "home/.local/share/airlock/sandboxes/app-1/home/e.key",
];

#[test]
fn any_depth_matches_files_at_every_level_but_not_in_git() {
    let t = Tree::new(APP);
    let m = t.expand("**/*.key");
    assert_eq!(
        t.found(&m),
        ["home/code/app/a.key", "home/code/app/deep/er/b.key"]
    );
    assert_eq!(m.count, 2);
    assert_eq!(m.base, t.project());
    assert!(!m.timed_out);
}

#[test]
fn home_patterns_match_one_level_per_star() {
    let t = Tree::new(APP);
    let m = t.expand("~/.config/*/token");
    assert_eq!(
        t.found(&m),
        [
            "home/.config/airlock/token",
            "home/.config/gh/token",
            "home/.config/glab/token"
        ],
        "the skip list names the data dir only here"
    );
    assert_eq!(
        m.seen, 7,
        "three names under .config, then one dir each: nothing else"
    );
}

#[test]
fn a_matched_directory_is_not_entered() {
    let t = Tree::new(APP);
    assert_eq!(
        t.found(&t.expand("**/secrets")),
        ["home/code/app/lib/secrets/", "home/code/app/secrets/"]
    );
    assert_eq!(
        t.found(&t.expand("secrets/**")),
        ["home/code/app/secrets/x", "home/code/app/secrets/y/"],
        "y matched, so y/z is not matched again"
    );
}

#[test]
fn a_trailing_slash_matches_directories_only() {
    let t = Tree::new(APP);
    assert_eq!(
        t.found(&t.expand("*/")),
        [
            "home/code/app/.git/",
            "home/code/app/cache/",
            "home/code/app/deep/",
            "home/code/app/lib/",
            "home/code/app/secrets/",
            "home/code/app/sub/"
        ]
    );
}

#[test]
fn airlock_state_is_neither_matched_nor_entered() {
    let t = Tree::new(APP);
    let m = t.expand("~/**/*.key");
    assert_eq!(
        t.found(&m),
        ["home/code/app/a.key", "home/code/app/deep/er/b.key"]
    );
    assert!(t.expand("~/.local/share/airlock/**").matches.is_empty());
}

#[test]
fn a_directory_holding_airlock_state_is_not_matched_but_walked_into() {
    let t = Tree::new(APP);
    let m = t.expand("~/*");
    assert_eq!(t.found(&m), ["home/.config/", "home/code/"]);
    assert_eq!(m.holding_airlock, [t.home().join(".local")]);
    let m = t.expand("~/.local/**/");
    assert_eq!(t.found(&m), Vec::<String>::new());
    assert_eq!(
        m.holding_airlock,
        [t.home().join(".local/share")],
        "share holds the data dir, which is neither matched nor entered"
    );
    assert_eq!(
        t.expand("~/.local").holding_airlock,
        [t.home().join(".local")]
    );
}

#[test]
fn symlinks_are_skipped_and_never_followed() {
    let t = Tree::new(&["home/code/app/real/k.key", "outside/o.key"]);
    let p = t.project();
    std::os::unix::fs::symlink(t.root.join("outside"), p.join("out")).unwrap();
    std::os::unix::fs::symlink(p.join("real/k.key"), p.join("link.key")).unwrap();
    let m = t.expand("**/*.key");
    assert_eq!(t.found(&m), ["home/code/app/real/k.key"]);
    assert_eq!(m.skipped, 1);
    assert_eq!(m.skipped_paths, [p.join("link.key")]);
}

#[test]
fn a_linked_base_is_followed_and_targets_keep_the_written_path() {
    let t = Tree::new(&["dotfiles/config/gh/token", "home/code/app/"]);
    std::os::unix::fs::symlink(t.root.join("dotfiles/config"), t.home().join(".config")).unwrap();
    let m = t.expand("~/.config/*/token");
    assert_eq!(m.matches.len(), 1);
    assert_eq!(m.matches[0].path, t.home().join(".config/gh/token"));
    assert_eq!(
        m.matches[0].resolved,
        Some(t.root.join("dotfiles/config/gh/token"))
    );
}

#[test]
fn a_literal_pattern_is_one_path_and_absolute_patterns_work() {
    let t = Tree::new(APP);
    assert_eq!(t.found(&t.expand("notes.txt")), ["home/code/app/notes.txt"]);
    assert!(t.expand("missing/*.key").matches.is_empty());
    let abs = format!("{}/home/code/app/deep/**/*.key", t.root.display());
    assert_eq!(t.found(&t.expand(&abs)), ["home/code/app/deep/er/b.key"]);
}

#[test]
fn past_the_limit_the_count_goes_on_and_nothing_is_kept() {
    let t = Tree::new(&["home/code/app/many/"]);
    let many = t.project().join("many");
    for n in 0..=MAX_MATCHES {
        fs::write(many.join(format!("f{n}")), "").unwrap();
    }
    let m = t.expand("many/*");
    assert_eq!(m.count, MAX_MATCHES + 1);
    assert!(m.matches.is_empty());
}

#[test]
fn the_walk_stops_at_its_deadline() {
    let t = Tree::new(APP);
    let limits = WalkLimits {
        deadline: Duration::ZERO,
        ..t.limits()
    };
    let m = expand("**/*.key", &t.home(), &t.project(), &limits);
    assert!(m.timed_out);
}
