//! mise the way developers have it: the real mise binary (fetched once by scripts/test into
//! `$AIRLOCK_TEST_TOOLS`) in `~/.local/bin`, a global config pinning a node version, and that
//! version installed under `~/.local/share/mise/installs` (the host's own node binary copied in,
//! as a download would leave it). On every backend this machine runs (native, bwrap, the local
//! container engine) and as the unprivileged user, the host's toolchain must resolve inside and
//! mise's directories must stay read-only: `mise install` fails and the host's installs are
//! unchanged.

mod common;
#[path = "common/podman.rs"]
#[allow(dead_code)]
mod podman;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::test_tools::{cached, install};
use common::users::{as_user, chown_tree, other_user};
use common::{TestHome, report, sandbox_starts, stdout, write};

const VERSION: &str = "18.99.0";

/// The script run inside: the pinned node through mise (its path and that it runs), then an
/// install and a write into mise's data dir, both of which must fail.
const SCRIPT: &str = r#"mise exec -- node -e 'console.log("node " + process.execPath)'
echo "exec=$?"
mise install node@18.98.0 >/dev/null 2>&1; echo "install=$?"
touch ~/.local/share/mise/planted 2>/dev/null; echo "touch=$?""#;

/// A home with mise, its config and one installed node; `None` (printed) when mise or node is
/// missing here.
fn mise_home() -> Option<TestHome> {
    let mise = cached("mise")?;
    let Some(node) = ["/usr/bin/node", "/usr/local/bin/node"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
    else {
        eprintln!("skipped: no node on this machine (apt-get install nodejs)");
        return None;
    };
    let h = TestHome::new("home/code/app");
    install(&mise, &h.home.join(".local/bin/mise"));
    install(&node, &installed_node(&h));
    write(
        &h.home.join(".config/mise/config.toml"),
        &format!("[tools]\nnode = \"{VERSION}\"\n"),
    );
    Some(h)
}

fn installed_node(h: &TestHome) -> PathBuf {
    h.home
        .join(".local/share/mise/installs/node")
        .join(VERSION)
        .join("bin/node")
}

fn path(h: &TestHome) -> String {
    format!("{}/.local/bin:/usr/bin:/bin", h.home.display())
}

/// What a launch must print: the host's install resolved, the install and the write refused.
fn check(h: &TestHome, out: &Output, backend: &str) {
    let want = format!(
        "node {}\nexec=0\ninstall=1\ntouch=1\n",
        installed_node(h).display()
    );
    assert_eq!(stdout(out), want, "{backend}: {}", report(out));
    let installs = h.home.join(".local/share/mise/installs/node");
    let versions: Vec<_> = fs::read_dir(&installs)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        versions,
        [VERSION],
        "{backend}: the host's installs changed"
    );
    assert!(!h.home.join(".local/share/mise/planted").exists());
}

fn bwrap_installed() -> bool {
    let ok = Path::new("/usr/bin/bwrap").exists();
    if !ok {
        eprintln!("skipped (bwrap): bubblewrap is not installed (apt-get install bubblewrap)");
    }
    ok
}

#[test]
fn the_hosts_mise_toolchain_resolves_read_only_on_every_backend() {
    let Some(h) = mise_home() else { return };
    if !sandbox_starts() {
        return;
    }
    let conf = h.root.join("containers.conf");
    write(&conf, podman::CONTAINERS_CONF);
    let conf = conf.display().to_string();
    let mut backends = vec!["native"];
    if bwrap_installed() {
        backends.push("bwrap");
    }
    // The local engine binds the host's tools as the spec says (as root here: see
    // tests/container_backend/); hidden files need the keeper, which engines lack.
    if nix::unistd::geteuid().is_root() && Path::new("/usr/bin/podman").exists() {
        backends.push("container");
    } else {
        eprintln!("skipped (container): needs root and podman here");
    }
    for backend in backends {
        let out = h.run_env(
            &[("PATH", &path(&h)), ("CONTAINERS_CONF", &conf)],
            &[
                "run",
                "--backend",
                backend,
                "--no-hide-env",
                "--network",
                "none",
                "--",
                "sh",
                "-c",
                SCRIPT,
            ],
        );
        check(&h, &out, backend);
    }
}

#[test]
fn the_unprivileged_user_gets_the_same_toolchain() {
    let Some(user) = other_user() else {
        eprintln!("skipped: needs root to run airlock as an unprivileged user (AIRLOCK_TEST_USER)");
        return;
    };
    let Some(h) = mise_home() else { return };
    if !sandbox_starts() {
        return;
    }
    let bin = h.root.join("bin");
    fs::create_dir(&bin).unwrap();
    fs::copy(common::AIRLOCK, bin.join("airlock")).unwrap();
    chown_tree(&h.root, user);
    let mut cmd = std::process::Command::new(bin.join("airlock"));
    cmd.args(["run", "--network", "none", "--", "sh", "-c", SCRIPT])
        .current_dir(&h.project)
        .env_clear()
        .env("HOME", &h.home)
        .env("PATH", path(&h))
        .stdin(std::process::Stdio::null());
    as_user(&mut cmd, user);
    let out = cmd.output().expect("spawn airlock");
    check(&h, &out, "native, unprivileged");
}
