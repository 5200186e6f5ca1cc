//! `[[sandbox.mounts]] pattern` globs expanded on the host at launch: a directory walk that never
//! follows a symlink, never enters `.git` or airlock's own directories, and stops at a deadline.
//!
//! The walk starts at the pattern's leading literal directories (`~/.config` for
//! `~/.config/*/token`), matches the rest with [`glob::Pattern`] (`*` and `?` within one path part,
//! `**` across any depth), and does not descend into a directory that matched: its mount covers
//! everything below with the same mode. The builder decides what the matches become; this module
//! only reports what is there.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::host::{MountSource, PathKind};

/// The most paths one pattern may match; past this the launch is refused (nothing is created).
pub const MAX_MATCHES: usize = 10_000;

/// How long one pattern's walk may take before the launch is refused.
pub const WALK_DEADLINE: Duration = Duration::from_secs(5);

/// How many skipped paths a report names (the count covers them all).
const NAMED_SKIPS: usize = 5;

/// Where a walk may not go, and how long it may take.
#[derive(Debug, Clone)]
pub struct WalkLimits {
    /// Directories neither matched nor entered: airlock's own config, data, state and cache
    /// dirs (canonical paths). A directory named `.git` is matched but never entered.
    pub skip: Vec<PathBuf>,
    pub deadline: Duration,
}

/// What one pattern matched on the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternMatches {
    /// Where the walk started: the pattern's leading directories, `~/` and the project expanded.
    pub base: PathBuf,
    /// Each match, in path order: where it appears inside (`path`), the host path it is read
    /// from (`resolved`, below the base's real path) and whether it is a directory or a file.
    /// Empty when more than [`MAX_MATCHES`] matched.
    pub matches: Vec<MountSource>,
    /// How many paths matched, those past [`MAX_MATCHES`] included.
    pub count: usize,
    /// Matches that are symlinks, sockets, fifos or devices, which are not mounted: how many.
    #[serde(default)]
    pub skipped: usize,
    /// The first few of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_paths: Vec<PathBuf>,
    /// Directories that matched but hold one of airlock's own (its config, the sandboxes' state,
    /// the trust store and bridge token): not mounted, walked into instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holding_airlock: Vec<PathBuf>,
    /// The walk reached its deadline: what it found is incomplete.
    #[serde(default)]
    pub timed_out: bool,
    /// How many directory entries the walk looked at.
    #[serde(default)]
    pub seen: usize,
}

/// Expands every pattern of `profile`'s `[[sandbox.mounts]]`, keyed by the pattern as written.
/// `home` and `project` are canonical.
pub fn gather(
    paths: &airlock_config::XdgPaths,
    home: &Path,
    project: &Path,
    profile: &airlock_config::Profile,
) -> BTreeMap<String, PatternMatches> {
    // A pattern must not mount airlock's own files: the trust store or the config made writable,
    // or every other project's sandbox home made visible.
    let limits = WalkLimits {
        skip: [
            paths.config_home.join("airlock"),
            paths.data_home.join("airlock"),
            paths.state_dir(),
            paths.cache_dir(),
        ]
        .into_iter()
        .map(|dir| airlock_config::canonicalize(&dir).unwrap_or(dir))
        .collect(),
        deadline: WALK_DEADLINE,
    };
    let mut out = BTreeMap::new();
    for m in &profile.mounts {
        if let airlock_config::MountSelector::Pattern(pattern) = &m.selector
            && !out.contains_key(pattern)
        {
            let found = expand(pattern, home, project, &limits);
            out.insert(pattern.clone(), found);
        }
    }
    out
}

/// One part of the pattern below its base: `**`, or a glob for one name.
enum Part {
    AnyDepth,
    Name(glob::Pattern),
}

const MATCH: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

fn is_literal(part: &str) -> bool {
    !part.contains(['*', '?', '['])
}

/// Expands `pattern` (checked by the config loader: see `airlock_config::mount_pattern_problem`):
/// relative to `project`, `~/…` under `home`, or absolute.
pub fn expand(pattern: &str, home: &Path, project: &Path, limits: &WalkLimits) -> PatternMatches {
    let started = Instant::now();
    let dirs_only = pattern.ends_with('/');
    let (anchor, body) = if let Some(rest) = pattern.strip_prefix("~/") {
        (home, rest)
    } else if let Some(rest) = pattern.strip_prefix('/') {
        (Path::new("/"), rest)
    } else {
        (project, pattern)
    };
    let parts: Vec<&str> = body.split('/').filter(|p| !p.is_empty()).collect();
    let literal = parts.iter().take_while(|p| is_literal(p)).count();
    let mut base = anchor.to_path_buf();
    base.extend(&parts[..literal]);
    let rest = &parts[literal..];
    let mut out = PatternMatches {
        base: base.clone(),
        ..PatternMatches::default()
    };
    // The leading directories are followed like a `path` entry's (a dotfiles link at ~/.config);
    // nothing below them is.
    let Some(real) = real_base(&base, rest.is_empty()) else {
        return out;
    };
    if limits.skip.iter().any(|s| real.starts_with(s)) {
        return out;
    }
    if rest.is_empty() {
        // No glob at all: the one path, when it is there.
        if let Some(kind) = kind_of(&real) {
            let found = Found {
                target: &base,
                real: &real,
                kind,
            };
            consider(&mut out, &found, limits, dirs_only);
        }
        return out;
    }
    let compiled: Option<Vec<Part>> = rest
        .iter()
        .map(|p| match *p {
            "**" => Some(Part::AnyDepth),
            p => glob::Pattern::new(p).ok().map(Part::Name),
        })
        .collect();
    let (Some(compiled), Ok(whole)) = (compiled, glob::Pattern::new(&rest.join("/"))) else {
        return out;
    };
    let walk = Walk {
        parts: &compiled,
        whole: &whole,
        dirs_only,
        limits,
        deadline: started + limits.deadline,
    };
    walk.run(&base, &real, &mut out);
    out.matches.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// `base` with its symlinks resolved; a missing base has no matches. When `base` is the whole
/// pattern, its last part is itself a candidate and must not be followed.
fn real_base(base: &Path, is_candidate: bool) -> Option<PathBuf> {
    if !is_candidate {
        return airlock_config::canonicalize(base).ok();
    }
    let parent = airlock_config::canonicalize(base.parent()?).ok()?;
    Some(parent.join(base.file_name()?))
}

/// What is at `path`, symlinks not followed: None when nothing is.
fn kind_of(path: &Path) -> Option<EntryKind> {
    let meta = fs::symlink_metadata(path).ok()?;
    Some(EntryKind::of(meta.file_type()))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    Dir,
    File,
    /// A symlink, socket, fifo or device.
    Other,
}

impl EntryKind {
    fn of(t: fs::FileType) -> EntryKind {
        if t.is_dir() {
            EntryKind::Dir
        } else if t.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        }
    }
}

/// A path the pattern matched: where it appears inside, where it is on the host, what it is.
struct Found<'a> {
    target: &'a Path,
    real: &'a Path,
    kind: EntryKind,
}

/// Records a match (or a skipped one); returns whether it was one.
fn consider(out: &mut PatternMatches, found: &Found, limits: &WalkLimits, dirs_only: bool) -> bool {
    let Found { target, real, kind } = *found;
    let kind = match kind {
        // Mounting it would show (or let the sandbox write) what lies below: refuse the match.
        EntryKind::Dir if limits.skip.iter().any(|s| s.starts_with(real)) => {
            out.holding_airlock.push(target.to_path_buf());
            return false;
        }
        EntryKind::Dir => PathKind::Dir,
        EntryKind::File if dirs_only => return false,
        EntryKind::File => PathKind::File,
        EntryKind::Other => {
            out.skipped += 1;
            if out.skipped_paths.len() < NAMED_SKIPS {
                out.skipped_paths.push(target.to_path_buf());
            }
            return false;
        }
    };
    out.count += 1;
    if out.count <= MAX_MATCHES {
        out.matches.push(MountSource {
            path: target.to_path_buf(),
            resolved: Some(real.to_path_buf()),
            kind,
        });
    } else {
        out.matches.clear();
    }
    true
}

struct Walk<'a> {
    parts: &'a [Part],
    whole: &'a glob::Pattern,
    dirs_only: bool,
    limits: &'a WalkLimits,
    deadline: Instant,
}

impl Walk<'_> {
    /// Depth first, names sorted; [`expand`] sorts the matches by path afterwards.
    fn run(&self, base: &Path, real: &Path, out: &mut PatternMatches) {
        let first_any = self
            .parts
            .iter()
            .position(|p| matches!(p, Part::AnyDepth))
            .unwrap_or(self.parts.len());
        // (target dir, real dir, its path below the base, its depth below the base)
        let mut stack = vec![(base.to_path_buf(), real.to_path_buf(), PathBuf::new(), 0)];
        while let Some((target, dir, rel, depth)) = stack.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                // Unreadable here is unreadable inside too: the sandbox runs as the same user.
                continue;
            };
            let mut names: Vec<(std::ffi::OsString, EntryKind)> = entries
                .filter_map(Result::ok)
                .filter_map(|e| Some((e.file_name(), EntryKind::of(e.file_type().ok()?))))
                .collect();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            let mut below = Vec::new();
            for (name, kind) in names {
                out.seen += 1;
                if Instant::now() >= self.deadline {
                    out.timed_out = true;
                    return;
                }
                let entry_real = dir.join(&name);
                if self.limits.skip.contains(&entry_real) {
                    continue;
                }
                // Before the first `**` each part must match its own name: prune there.
                if depth < first_any {
                    let Part::Name(part) = &self.parts[depth] else {
                        unreachable!("parts before the first ** are names")
                    };
                    if !name.to_str().is_some_and(|n| part.matches_with(n, MATCH)) {
                        continue;
                    }
                }
                let entry_rel = rel.join(&name);
                let entry_target = target.join(&name);
                let found = Found {
                    target: &entry_target,
                    real: &entry_real,
                    kind,
                };
                let matched = self.whole.matches_path_with(&entry_rel, MATCH)
                    && consider(out, &found, self.limits, self.dirs_only);
                let deeper = first_any < self.parts.len() || depth + 1 < self.parts.len();
                if !matched && kind == EntryKind::Dir && deeper && name != ".git" {
                    below.push((entry_target, entry_real, entry_rel, depth + 1));
                }
            }
            // Reversed, so the stack pops them in name order.
            stack.extend(below.into_iter().rev());
        }
    }
}

#[cfg(test)]
mod tests;
