//! Tools installed the way developers install them, in a temp HOME, run inside a real sandbox:
//! a node CLI with a dependency from `npm install -g --prefix ~/.local` (a local tarball, no
//! network), an nvm-shaped tree with the real node binary, a pyenv-shaped tree around the real
//! python, and the host's own rustup toolchain where there is one. Each must run inside, not only
//! be found on the host.

mod common;

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::Command;

use common::{TestHome, report, sandbox_starts, stdout, write};

fn executable(path: &Path, text: &str) {
    write(path, text);
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var("PATH").ok()?.split(':').find_map(|dir| {
        let path = Path::new(dir).join(program);
        path.is_file()
            .then(|| fs::canonicalize(path).ok())
            .flatten()
    })
}

/// `airlock run --network none -- sh -c <script>` with `PATH` = `path`.
fn inside(h: &TestHome, path: &str, script: &str) -> std::process::Output {
    h.airlock(&["run", "--network", "none", "--", "sh", "-c", script])
        .env("PATH", path)
        .output()
        .expect("spawn airlock")
}

#[test]
fn a_cli_from_npm_install_g_prefix_runs_with_its_dependency() {
    if !sandbox_starts() {
        return;
    }
    let Some(npm) = which("npm") else {
        eprintln!("skipped: npm is not installed (scripts/test installs it)");
        return;
    };
    let h = TestHome::new("home/code/app");
    // A package whose bin requires a dependency bundled with it, packed to a tarball.
    let src = h.root.join("src/demo-cli");
    write(
        &src.join("package.json"),
        r#"{"name":"demo-cli","version":"1.0.0","bin":{"codex":"bin/cli.js"},
            "dependencies":{"demo-dep":"1.0.0"},"bundleDependencies":["demo-dep"]}"#,
    );
    executable(
        &src.join("bin/cli.js"),
        "#!/usr/bin/env node\nconsole.log('demo-cli ' + require('demo-dep'));\n",
    );
    write(
        &src.join("node_modules/demo-dep/package.json"),
        r#"{"name":"demo-dep","version":"1.0.0","main":"index.js"}"#,
    );
    write(
        &src.join("node_modules/demo-dep/index.js"),
        "module.exports = 'with its dependency';\n",
    );
    let npm_env = |cmd: &mut Command| {
        cmd.env_clear()
            .env("HOME", &h.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin");
    };
    let mut pack = Command::new(&npm);
    npm_env(&mut pack);
    let packed = pack
        .args(["pack", "--silent"])
        .current_dir(&src)
        .output()
        .expect("npm pack");
    assert!(packed.status.success(), "npm pack: {}", report(&packed));
    let tarball = src.join(stdout(&packed).trim());
    let mut install = Command::new(&npm);
    npm_env(&mut install);
    let installed = install
        .args([
            "install",
            "-g",
            "--offline",
            "--no-audit",
            "--no-fund",
            "--prefix",
        ])
        .arg(h.home.join(".local"))
        .arg(&tarball)
        .output()
        .expect("npm install");
    assert!(
        installed.status.success(),
        "npm install: {}",
        report(&installed)
    );
    assert!(
        fs::symlink_metadata(h.home.join(".local/bin/codex"))
            .is_ok_and(|m| m.file_type().is_symlink()),
        "npm made ~/.local/bin/codex a link into lib/node_modules"
    );
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        h.home.join(".local/bin").display()
    );
    let out = inside(&h, &path, "codex");
    assert!(
        out.status.success() && stdout(&out).contains("demo-cli with its dependency"),
        "{}",
        report(&out)
    );
}

#[test]
fn an_nvm_tree_brings_its_node_and_its_own_npm() {
    if !sandbox_starts() {
        return;
    }
    let Some(node) = which("node") else {
        eprintln!("skipped: node is not installed (scripts/test installs it)");
        return;
    };
    let h = TestHome::new("home/code/app");
    let version = h.home.join(".nvm/versions/node/v20.0.0");
    fs::create_dir_all(version.join("bin")).expect("nvm bin");
    fs::copy(&node, version.join("bin/node")).expect("copy node");
    // nvm's npm: a link into the version's lib/node_modules, as nvm installs it.
    let cli = version.join("lib/node_modules/npm/bin/npm-cli.js");
    executable(
        &cli,
        "#!/usr/bin/env node\nconsole.log('nvm npm on ' + process.version);\n",
    );
    write(
        &version.join("lib/node_modules/npm/package.json"),
        r#"{"name":"npm","version":"10.0.0"}"#,
    );
    symlink(
        "../lib/node_modules/npm/bin/npm-cli.js",
        version.join("bin/npm"),
    )
    .expect("npm link");
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        version.join("bin").display()
    );
    let out = inside(
        &h,
        &path,
        "command -v node; node -e 'console.log(1+1)'; npm",
    );
    let text = stdout(&out);
    assert!(
        out.status.success()
            && text.contains(&version.join("bin/node").display().to_string())
            && text.contains("\n2\n")
            && text.contains("nvm npm on v"),
        "{}",
        report(&out)
    );
}

#[test]
fn a_pyenv_tree_runs_python_and_makes_a_venv() {
    if !sandbox_starts() {
        return;
    }
    let Some(python) = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.is_file())
    else {
        eprintln!("skipped: no system python3 (scripts/test installs it)");
        return;
    };
    let h = TestHome::new("home/code/app");
    let root = h.home.join(".pyenv");
    // pyenv's layout: shims that exec `libexec/pyenv exec`, which runs the selected version.
    let version = root.join("versions/3.99.0/bin");
    fs::create_dir_all(&version).expect("versions");
    symlink(python, version.join("python3")).expect("python link");
    write(&root.join("version"), "3.99.0\n");
    executable(
        &root.join("libexec/pyenv"),
        &format!(
            "#!/bin/sh\n[ \"$1\" = exec ] || exit 2\nshift\nname=$1\nshift\n\
             exec \"{root}/versions/$(cat {root}/version)/bin/$name\" \"$@\"\n",
            root = root.display()
        ),
    );
    executable(
        &root.join("shims/python3"),
        &format!(
            "#!/bin/sh\nexec \"{}\" exec python3 \"$@\"\n",
            root.join("libexec/pyenv").display()
        ),
    );
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        root.join("shims").display()
    );
    let out = inside(
        &h,
        &path,
        "python3 -c 'print(\"py\", 6*7)' && python3 -m venv .venv && .venv/bin/python -c 'print(\"venv ok\")'",
    );
    let text = stdout(&out);
    assert!(
        out.status.success() && text.contains("py 42") && text.contains("venv ok"),
        "{}",
        report(&out)
    );
}

#[test]
fn the_hosts_rustup_toolchain_builds_inside_offline() {
    if !sandbox_starts() {
        return;
    }
    let real_home = std::env::var("HOME").unwrap_or_default();
    let (rustup, cargo) = (
        Path::new(&real_home).join(".rustup"),
        Path::new(&real_home).join(".cargo"),
    );
    if !rustup.join("toolchains").is_dir() || !cargo.join("bin/cargo").is_file() {
        eprintln!("skipped: no rustup toolchain in {real_home} (rustup.rs installs one)");
        return;
    }
    let h = TestHome::new("home/code/app");
    // The test home's ~/.rustup and ~/.cargo/bin are the host's (the tool mounts what links lead
    // to); its registry cache starts empty.
    symlink(&rustup, h.home.join(".rustup")).expect("rustup link");
    fs::create_dir_all(h.home.join(".cargo/registry")).expect("registry");
    symlink(cargo.join("bin"), h.home.join(".cargo/bin")).expect("cargo bin link");
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        h.home.join(".cargo/bin").display()
    );
    let out = inside(
        &h,
        &path,
        "cargo new -q --vcs none hello && cd hello && cargo build -q --offline && ./target/debug/hello",
    );
    let text = stdout(&out);
    assert!(
        out.status.success() && text.contains("Hello, world!"),
        "{}",
        report(&out)
    );
}
