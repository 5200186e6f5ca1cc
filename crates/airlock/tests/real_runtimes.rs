//! More tools the way developers install them, in a temp HOME, run inside a real sandbox: the real
//! bun, deno and uv binaries (fetched once by scripts/test into `$AIRLOCK_TEST_TOOLS`) in the places
//! their installers put them, a uv-managed Python, and a CLI in a pipx venv. Each must run inside,
//! and what the sandbox writes to their dirs must stay in the sandbox.

mod common;

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::Command;

use common::test_tools::{cached, install};
use common::{TestHome, report, sandbox_starts, stdout, write};

/// `airlock run --network none -- sh -c <script>` with `PATH` = `path`.
fn inside(h: &TestHome, path: &str, script: &str) -> std::process::Output {
    h.airlock(&["run", "--network", "none", "--", "sh", "-c", script])
        .env("PATH", path)
        .output()
        .expect("spawn airlock")
}

#[test]
fn bun_from_its_installer_dir_runs_and_keeps_writes_inside() {
    let Some(bun) = cached("bun") else { return };
    if !sandbox_starts() {
        return;
    }
    let h = TestHome::new("home/code/app");
    install(&bun, &h.home.join(".bun/bin/bun"));
    let path = format!("{}/.bun/bin:/usr/bin:/bin", h.home.display());
    write(
        &h.project.join("hello.ts"),
        "const n: number = 6 * 7;\nconsole.log(`bun ${n}`);\n",
    );
    let o = inside(
        &h,
        &path,
        "command -v bun; bun hello.ts && touch ~/.bun/from-sandbox && echo wrote",
    );
    let want = format!("{}/.bun/bin/bun\nbun 42\nwrote\n", h.home.display());
    assert_eq!(stdout(&o), want, "{}", report(&o));
    assert!(
        !h.home.join(".bun/from-sandbox").exists(),
        "the overlay kept it"
    );
}

#[test]
fn deno_from_its_installer_dir_runs_with_its_cache_in_the_sandbox() {
    let Some(deno) = cached("deno") else { return };
    if !sandbox_starts() {
        return;
    }
    let h = TestHome::new("home/code/app");
    install(&deno, &h.home.join(".deno/bin/deno"));
    fs::create_dir_all(h.home.join(".cache/deno")).expect("cache dir");
    let path = format!("{}/.deno/bin:/usr/bin:/bin", h.home.display());
    write(
        &h.project.join("hello.ts"),
        "const n: number = 6 * 7;\nconsole.log(`deno ${n}`);\n",
    );
    let o = inside(&h, &path, "deno run --quiet hello.ts");
    assert_eq!(stdout(&o), "deno 42\n", "{}", report(&o));
    let host_cache: Vec<_> = fs::read_dir(h.home.join(".cache/deno"))
        .expect("host cache")
        .collect();
    assert!(
        host_cache.is_empty(),
        "deno's cache writes stayed in the sandbox"
    );
}

#[test]
fn uv_makes_a_venv_and_a_uv_managed_python_runs() {
    let Some(uv) = cached("uv") else { return };
    if !sandbox_starts() {
        return;
    }
    let Ok(python) = fs::canonicalize("/usr/bin/python3") else {
        eprintln!("skipped: no /usr/bin/python3");
        return;
    };
    let h = TestHome::new("home/code/app");
    install(&uv, &h.home.join(".local/bin/uv"));
    // A uv-managed Python: an install under ~/.local/share/uv/python, linked from ~/.local/bin.
    let managed = h
        .home
        .join(".local/share/uv/python/cpython-3-linux-x86_64-gnu/bin");
    fs::create_dir_all(&managed).expect("python dir");
    symlink(&python, managed.join("python3")).expect("python link");
    symlink(managed.join("python3"), h.home.join(".local/bin/python3")).expect("bin link");
    let path = format!("{}/.local/bin:/usr/bin:/bin", h.home.display());
    let o = inside(
        &h,
        &path,
        "uv --version | cut -d' ' -f1; python3 -c 'print(6 * 7)'; \
         uv venv --quiet --python /usr/bin/python3 .venv && .venv/bin/python -c 'print(\"venv ok\")'",
    );
    assert_eq!(stdout(&o), "uv\n42\nvenv ok\n", "{}", report(&o));
}

#[test]
fn a_cli_in_a_pipx_venv_runs() {
    if !sandbox_starts() {
        return;
    }
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: no /usr/bin/python3");
        return;
    }
    let h = TestHome::new("home/code/app");
    // What `pipx install aider-chat` leaves: a venv of its own and a link in ~/.local/bin.
    let venv = h.home.join(".local/share/pipx/venvs/aider-chat");
    let made = Command::new("/usr/bin/python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .output()
        .expect("python3 -m venv");
    assert!(made.status.success(), "venv: {}", report(&made));
    let script = venv.join("bin/aider");
    write(
        &script,
        &format!(
            "#!{}\nimport sys\nprint('aider from', sys.prefix)\n",
            venv.join("bin/python").display()
        ),
    );
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::create_dir_all(h.home.join(".local/bin")).expect("bin");
    symlink(&script, h.home.join(".local/bin/aider")).expect("link");
    let path = format!("{}/.local/bin:/usr/bin:/bin", h.home.display());
    let o = inside(&h, &path, "aider");
    assert_eq!(
        stdout(&o),
        format!("aider from {}\n", venv.display()),
        "{}",
        report(&o)
    );
}
