//! The sandbox's view of a repository's `config`: the host file with its secrets taken out.
//!
//! A repository config often holds credentials: a token in a remote URL
//! (`https://x-access-token:…@github.com/…`), an `http.extraHeader` with a bearer token, a
//! `[credential]` helper or username, a `[url "https://<token>@host/"]` rewrite. None of that is
//! needed to read history or commit, and a prompt-injected agent would post it anywhere. The
//! view keeps everything else, line for line, so git inside behaves as on the host.
//!
//! The reader is line-based and does not run git: sections (`[name]`, `[name "sub"]`,
//! `[name.sub]`), `key = value` lines (a key may follow the header on the same line) and
//! backslash continuations. What it drops:
//! - whole `credential` sections, with any subsection;
//! - `extraheader` keys in `http` sections;
//! - keys whose name contains `token`, `password`, `secret` or `auth` (`github.oauthtoken`, …);
//! - userinfo (`user:pass@`) after every `scheme://`: in values, in subsection names (`[url "…"]`,
//!   `[http "…"]`, any other) and in comments.
//!
//! The host file is never rewritten: this text is what the sandbox sees instead.

/// Key-name fragments that mark a value as a secret, in any section.
const SECRET_KEY_FRAGMENTS: &[&str] = &["token", "password", "secret", "auth"];

/// The sanitised text of a git config file.
pub fn sanitize(config: &str) -> String {
    let mut out = String::with_capacity(config.len());
    let mut section = Section::default();
    let mut dropping_continuation = false;
    let mut keeping_continuation = false;
    for line in config.split_inclusive('\n') {
        if dropping_continuation || keeping_continuation {
            let continues = ends_with_continuation(line);
            if keeping_continuation {
                out.push_str(&strip_userinfo_in(line));
            }
            if !continues {
                dropping_continuation = false;
                keeping_continuation = false;
            }
            continue;
        }
        let trimmed = line.trim_start();
        let (header, rest) = match trimmed.strip_prefix('[') {
            Some(after) => match header_end(after) {
                Some(end) => (Some(&after[..end]), &after[end + 1..]),
                None => (None, trimmed),
            },
            None => (None, trimmed),
        };
        if let Some(header) = header {
            section = Section::parse(header);
            if section.dropped() {
                dropping_continuation = ends_with_continuation(line);
                continue;
            }
            out.push('[');
            out.push_str(&strip_userinfo_in(header));
            out.push(']');
            // `[core] bare = false`: a key on the header's line.
            let kept = strip_userinfo_in(rest.trim_start());
            if rest.trim().is_empty() || section.drops_key_in(rest, &kept) {
                out.push('\n');
                dropping_continuation = ends_with_continuation(line);
            } else {
                out.push(' ');
                out.push_str(&kept);
                keeping_continuation = ends_with_continuation(line);
            }
            continue;
        }
        if section.dropped() {
            dropping_continuation = ends_with_continuation(line);
            continue;
        }
        if is_comment(rest) || rest.trim().is_empty() {
            out.push_str(&strip_userinfo_in(line));
            continue;
        }
        let kept = strip_userinfo_in(line);
        if section.drops_key_in(rest, &kept) {
            dropping_continuation = ends_with_continuation(line);
            continue;
        }
        out.push_str(&kept);
        keeping_continuation = ends_with_continuation(line);
    }
    out
}

/// The section a line belongs to, lower-cased as git compares names.
#[derive(Default, Clone)]
struct Section {
    name: String,
    sub: Option<String>,
}

impl Section {
    fn parse(header: &str) -> Section {
        let header = header.trim();
        match header.split_once(|c: char| c.is_whitespace() || c == '"') {
            Some((name, sub)) => Section {
                name: name.trim().to_ascii_lowercase(),
                sub: Some(sub.trim().trim_matches('"').to_owned()),
            },
            None => match header.split_once('.') {
                Some((name, sub)) => Section {
                    name: name.to_ascii_lowercase(),
                    sub: Some(sub.to_owned()),
                },
                None => Section {
                    name: header.to_ascii_lowercase(),
                    sub: None,
                },
            },
        }
    }

    fn dropped(&self) -> bool {
        self.name == "credential"
    }

    fn drops_key(&self, key: &str) -> bool {
        (self.name == "http" && key == "extraheader")
            || SECRET_KEY_FRAGMENTS.iter().any(|f| key.contains(f))
    }

    /// Whether the key line `text`, or `kept` (the same line with userinfo taken out), names a key
    /// to drop. A real key name holds no `://`, so the two only differ on lines git would not
    /// read; asking both keeps a second pass from dropping what the first kept.
    fn drops_key_in(&self, text: &str, kept: &str) -> bool {
        self.drops_key(&key_name(text)) || self.drops_key(&key_name(kept))
    }
}

/// Where a header's closing `]` is, outside its quoted subsection.
fn header_end(after_bracket: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in after_bracket.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ']' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

fn is_comment(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with('#') || t.starts_with(';')
}

/// A variable's name, lower-cased (git's names are case-insensitive).
fn key_name(text: &str) -> String {
    text.trim_start()
        .split(|c: char| c == '=' || c.is_whitespace())
        .next()
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// Whether a line ends in a backslash that continues the value on the next line.
fn ends_with_continuation(line: &str) -> bool {
    let body = line.trim_end_matches(['\n', '\r']);
    let backslashes = body.chars().rev().take_while(|c| *c == '\\').count();
    backslashes % 2 == 1
}

/// `scheme://user:pass@host…` becomes `scheme://host…`, wherever it appears in `text`.
fn strip_userinfo_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let authority_end = after
            .find(['/', '?', '#', '"', ' ', '\t', '\n', '\r'])
            .unwrap_or(after.len());
        let authority = &after[..authority_end];
        let kept = authority
            .rfind('@')
            .map_or(authority, |at| &authority[at + 1..]);
        rest = &after[authority_end..];
        // `a://b:` then `//user:pass@host`: the kept `:` starts another `://`, so it is left in
        // `rest` for the next search rather than skipped with this authority.
        match kept.strip_suffix(':') {
            Some(before_colon) if rest.starts_with("//") => {
                out.push_str(before_colon);
                rest = &after[authority_end - 1..];
            }
            _ => out.push_str(kept),
        }
    }
    out.push_str(rest);
    out
}

/// Every variable line of a config text with the section it is in: `(section, "key = value")`.
/// A key on a header's line (`[core] bare = false`) counts; comments and blank lines do not.
fn variables(config: &str) -> Vec<(Section, &str)> {
    let mut section = Section::default();
    let mut out = Vec::new();
    for line in config.lines() {
        let trimmed = line.trim_start();
        let rest = match trimmed.strip_prefix('[') {
            Some(after) => match header_end(after) {
                Some(end) => {
                    section = Section::parse(&after[..end]);
                    &after[end + 1..]
                }
                None => continue,
            },
            None => trimmed,
        };
        if !rest.trim().is_empty() && !is_comment(rest) {
            out.push((section.clone(), rest));
        }
    }
    out
}

/// The hosts of the `remote.*.url` and `pushurl` values of a config text (`https://host/…`,
/// `ssh://git@host/…`, `git@host:o/r`), lower-cased, without port or userinfo.
pub fn remote_hosts(config: &str) -> Vec<String> {
    let mut hosts = Vec::new();
    for (section, rest) in variables(config) {
        if section.name != "remote" || !matches!(key_name(rest).as_str(), "url" | "pushurl") {
            continue;
        }
        let Some((_, value)) = rest.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"');
        let authority = match value.split_once("://") {
            Some((_, rest)) => rest.split('/').next().unwrap_or(""),
            // scp-like `user@host:path`; a local path has no `:` before any `/`.
            None => match value.split_once(':') {
                Some((host, _)) if !host.contains('/') => host,
                _ => continue,
            },
        };
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
        if !host.is_empty() && !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    hosts
}

/// The last value of `<section>.<key>` (no subsection) as plainly written: `None` when absent,
/// quoted, escaped or continued, so a value this reader cannot follow is never acted upon.
pub fn plain_value(config: &str, section: &str, key: &str) -> Option<String> {
    let mut found = None;
    for (current, rest) in variables(config) {
        if current.name != section || current.sub.is_some() || key_name(rest) != key {
            continue;
        }
        let value = rest.split_once('=').map_or("true", |(_, v)| v).trim();
        found = (!value.contains(['"', '\\', ';', '#'])).then(|| value.to_owned());
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_in_remote_urls_are_stripped_and_the_rest_kept() {
        let config = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\
                      [remote \"origin\"]\n\turl = https://x-access-token:ghs_SECRET@github.com/o/r.git\n\
                      \tpushurl = https://user@gitlab.example/o/r\n\
                      \tfetch = +refs/heads/*:refs/remotes/origin/*\n\
                      [branch \"main\"]\n\tremote = origin\n";
        let out = sanitize(config);
        assert!(!out.contains("SECRET"), "{out}");
        assert!(!out.contains("user@"), "{out}");
        assert!(
            out.contains("\turl = https://github.com/o/r.git\n"),
            "{out}"
        );
        assert!(
            out.contains("\tpushurl = https://gitlab.example/o/r\n"),
            "{out}"
        );
        assert!(
            out.contains("[branch \"main\"]\n\tremote = origin\n"),
            "{out}"
        );
        assert!(out.contains("\tbare = false\n"), "{out}");
    }

    #[test]
    fn scp_like_remotes_keep_their_user() {
        let out = sanitize("[remote \"o\"]\n\turl = git@github.com:o/r.git\n");
        assert_eq!(out, "[remote \"o\"]\n\turl = git@github.com:o/r.git\n");
    }

    #[test]
    fn credential_sections_and_extra_headers_are_dropped() {
        let config = "[credential]\n\thelper = store --file /x\n\tusername = ann\n\
                      [credential \"https://github.com\"]\n\thelper = !gh auth git-credential\n\
                      [http]\n\textraheader = AUTHORIZATION: bearer SECRET1\n\tsslVerify = true\n\
                      [http \"https://ghe.example/\"]\n\textraHeader = X: SECRET2\n\
                      [github]\n\toauthtoken = SECRET3\n\tuser = ann\n";
        let out = sanitize(config);
        for gone in ["SECRET", "helper", "username", "credential"] {
            assert!(!out.contains(gone), "{gone} in {out}");
        }
        assert!(out.contains("[http]\n\tsslVerify = true\n"), "{out}");
        assert!(out.contains("[github]\n\tuser = ann\n"), "{out}");
    }

    #[test]
    fn continued_values_of_dropped_keys_go_with_them() {
        let config =
            "[http]\n\textraheader = A: \\\n SECRET\n\tpostBuffer = 1\n[core]\n\tx = a\\\n b\n";
        let out = sanitize(config);
        assert!(!out.contains("SECRET"), "{out}");
        assert!(out.contains("\tpostBuffer = 1\n"), "{out}");
        assert!(out.contains("\tx = a\\\n b\n"), "{out}");
    }

    #[test]
    fn url_rewrites_lose_the_userinfo_in_their_name() {
        let config =
            "[url \"https://tok:SECRET@github.com/\"]\n\tinsteadOf = https://github.com/\n";
        let out = sanitize(config);
        assert_eq!(
            out,
            "[url \"https://github.com/\"]\n\tinsteadOf = https://github.com/\n"
        );
    }

    /// Found by the `git_config` fuzz target: an authority ending in `:` right before `//` hid
    /// the `://` it starts, and the userinfo after it was kept.
    #[test]
    fn a_scheme_separator_inside_an_authority_is_still_searched() {
        let out = sanitize("[remote \"o\"]\n\turl = https://x-access://u:SECRET@github.com/o/r\n");
        assert_eq!(
            out,
            "[remote \"o\"]\n\turl = https://x-access://github.com/o/r\n"
        );
        let out = sanitize("[remote \"o\"]\n\turl = a://b@://c@d://e:f@g\n");
        assert_eq!(out, "[remote \"o\"]\n\turl = a://://d://g\n");
    }

    #[test]
    fn keys_on_a_header_line_and_legacy_subsections_are_read() {
        let out = sanitize("[credential.https://x] helper = SECRET\n[core] bare = false\n");
        assert_eq!(out, "[core] bare = false\n");
        let out = sanitize("[http] extraheader = SECRET\n[a]\n");
        assert_eq!(out, "[http]\n[a]\n");
    }

    /// Found by the `git_config` fuzz target: userinfo in a section header other than `[url "…"]`
    /// (here one git would not even read) and in comments was kept.
    #[test]
    fn userinfo_goes_from_every_header_and_comment() {
        let config = "[http \"https://tok:SECRET@ghe.example/\"]\n\tsslVerify = true\n\
                      [re = https://x-access-token:SECRET@github.com [core]\n\
                      # cloned from https://tok:SECRET@github.com/o/r\n\
                      [core] ; was https://u:SECRET@x.example/\n";
        let out = sanitize(config);
        assert!(!out.contains("SECRET"), "{out}");
        assert!(
            out.starts_with("[http \"https://ghe.example/\"]\n\tsslVerify = true\n"),
            "{out}"
        );
        assert!(
            out.contains("# cloned from https://github.com/o/r\n"),
            "{out}"
        );
    }

    /// Found by the `git_config` fuzz target: userinfo that held the whitespace ending a garbled
    /// line's "key" hid the `token` after it, so a second pass dropped what the first had kept.
    #[test]
    fn sanitising_twice_changes_nothing() {
        let config = "[core]\n[[://g\x0bit@github.com/\"]tokenteem/\n\tbare = false\n";
        let out = sanitize(config);
        assert_eq!(out, "[core]\n\tbare = false\n");
        assert_eq!(sanitize(&out), out);
    }

    #[test]
    fn comments_and_blank_lines_survive() {
        let config = "# top\n[core]\n\t; note\n\n\tbare = false\n";
        assert_eq!(sanitize(config), config);
    }

    #[test]
    fn remote_hosts_are_read_from_every_url_form() {
        let config = "[remote \"a\"]\n\turl = https://tok@GitHub.com/o/r.git\n\
                      \tpushurl = ssh://git@gitlab.example:2222/o/r\n\
                      [remote \"b\"]\n\turl = git@bitbucket.org:o/r.git\n\
                      [remote \"c\"]\n\turl = /srv/repos/r.git\n[branch \"x\"]\n\turl = https://no.example/\n";
        assert_eq!(
            remote_hosts(config),
            vec!["github.com", "gitlab.example", "bitbucket.org"]
        );
    }

    #[test]
    fn plain_values_are_read_and_odd_ones_refused() {
        let config = "[core]\n\thooksPath = .husky/_\n[Core]\n\thookspath = .husky\n";
        assert_eq!(
            plain_value(config, "core", "hookspath").as_deref(),
            Some(".husky")
        );
        assert_eq!(
            plain_value("[core]\n\thooksPath = \"a b\"\n", "core", "hookspath"),
            None
        );
        assert_eq!(
            plain_value("[core \"x\"]\n\thooksPath = a\n", "core", "hookspath"),
            None
        );
        assert_eq!(
            plain_value("[core] hooksPath = h\n", "core", "hookspath").as_deref(),
            Some("h")
        );
    }
}
