//! `[sandbox.environment.<NAME>]`: parsing, every bad input, layering, and reading `file` sources.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use airlock_config::{EnvSource, EnvironmentVar, Profile, parse_str, read_file_value};
use common::{Home, assert_contains};

const ORIGIN: &str = "/home/u/.config/airlock/config.toml";

fn parse_err(text: &str) -> String {
    parse_str(text, Path::new(ORIGIN))
        .expect_err("an error")
        .to_string()
}

#[test]
fn each_source_parses_and_layers_with_its_file() {
    let cfg = parse_str(
        r#"
        [sandbox.environment.NODE_ENV]
        value = "development"
        [sandbox.environment.GITHUB_TOKEN]
        env = "GH_TOKEN"
        [sandbox.environment._KEY2]
        file = "~/.config/airlock/key"
        "#,
        Path::new(ORIGIN),
    )
    .expect("valid");
    let profile = Profile::layer(Some((Path::new(ORIGIN), &cfg)), None);
    let var = |source| EnvironmentVar {
        source,
        origin: PathBuf::from(ORIGIN),
    };
    assert_eq!(
        profile.environment,
        [
            (
                "GITHUB_TOKEN".to_owned(),
                var(EnvSource::Env("GH_TOKEN".into()))
            ),
            (
                "NODE_ENV".to_owned(),
                var(EnvSource::Value("development".into()))
            ),
            (
                "_KEY2".to_owned(),
                var(EnvSource::File("~/.config/airlock/key".into()))
            ),
        ]
        .into()
    );
}

#[test]
fn the_project_entry_replaces_the_global_one_per_name() {
    let g = parse_str(
        "[sandbox.environment.A]\nvalue = \"global\"\n[sandbox.environment.B]\nenv = \"HOST_B\"\n",
        Path::new("/g.toml"),
    )
    .expect("global");
    let p = parse_str(
        "[sandbox.environment.A]\nfile = \"a.txt\"\n",
        Path::new("/p/.airlock.toml"),
    )
    .expect("project");
    let env = Profile::layer(
        Some((Path::new("/g.toml"), &g)),
        Some((Path::new("/p/.airlock.toml"), &p)),
    )
    .environment;
    assert_eq!(env["A"].source, EnvSource::File("a.txt".into()));
    assert_eq!(env["A"].origin, Path::new("/p/.airlock.toml"));
    assert_eq!(env["B"].source, EnvSource::Env("HOST_B".into()));
    assert_eq!(env["B"].origin, Path::new("/g.toml"));
}

#[test]
fn a_bad_name_is_an_error_naming_the_key_and_the_file() {
    for (written, shown, why) in [
        ("\"bad-name\"", "bad-name", "only letters, digits and `_`"),
        ("1X", "1X", "starts with a digit"),
        ("\"\"", "\"\"", "empty"),
        ("\"A B\"", "\"A B\"", "only letters"),
        ("\"Ä\"", "\"Ä\"", "only letters"),
    ] {
        let msg = parse_err(&format!("[sandbox.environment.{written}]\nvalue = \"x\"\n"));
        assert_contains(
            &msg,
            &[
                ORIGIN,
                &format!("[sandbox.environment.{shown}]"),
                why,
                "not a valid environment variable name",
            ],
        );
    }
}

#[test]
fn exactly_one_source_is_required() {
    let msg = parse_err("[sandbox.environment.X]\nvalue = \"a\"\nenv = \"B\"\n");
    assert_contains(
        &msg,
        &[
            ORIGIN,
            "[sandbox.environment.X] sets both `value` and `env`",
            "set exactly one of value",
        ],
    );
    let msg = parse_err("[sandbox.environment.X]\nvalue = \"a\"\nenv = \"B\"\nfile = \"f\"\n");
    assert_contains(&msg, &["sets both `value` and `env` and `file`"]);
    let msg = parse_err("[sandbox.environment.X]\n");
    assert_contains(
        &msg,
        &[
            ORIGIN,
            "[sandbox.environment.X] sets none of `value`, `env` and `file`",
        ],
    );
}

#[test]
fn unusable_sources_are_errors_and_never_echo_a_value() {
    let msg = parse_err("[sandbox.environment.X]\nenv = \"NOT-A-VAR\"\n");
    assert_contains(
        &msg,
        &[
            ORIGIN,
            "env = \"NOT-A-VAR\" is not a valid host variable name",
        ],
    );
    let msg = parse_err("[sandbox.environment.X]\nfile = \"\"\n");
    assert_contains(&msg, &["file = \"\" names no file (it is empty)"]);
    let msg = parse_err("[sandbox.environment.X]\nvalue = \"s3cret\\u0000\"\n");
    assert_contains(&msg, &["`value` contains a NUL byte"]);
    assert!(!msg.contains("s3cret"), "{msg}");
    // An unknown key or a wrong type: toml's message with the valid keys.
    let msg = parse_err("[sandbox.environment.X]\nvalu = \"a\"\n");
    assert_contains(&msg, &[ORIGIN, "valu", "`value`", "`env`", "`file`"]);
    let msg = parse_err("[sandbox.environment]\nX = \"a\"\n");
    assert_contains(&msg, &[ORIGIN, "X"]);
}

#[test]
fn a_name_also_passed_through_is_an_error_naming_both() {
    let msg = parse_err(
        "[sandbox]\nenv_passthrough = [\"TOKEN\"]\n[sandbox.environment.TOKEN]\nvalue = \"x\"\n",
    );
    assert_contains(
        &msg,
        &[
            "[sandbox.environment.TOKEN] in /home/u/.config/airlock/config.toml",
            "env_passthrough = [\"TOKEN\"] in /home/u/.config/airlock/config.toml",
            "keep one",
        ],
    );
    // Across files: the global file passes it through, the project sets it.
    let h = Home::new();
    let global = h.global("[sandbox]\nenv_passthrough = [\"TOKEN\"]\n");
    let project = h.trusted_project("[sandbox.environment.TOKEN]\nenv = \"MY_TOKEN\"\n");
    let msg = h.load_err();
    assert_contains(
        &msg,
        &[
            &format!("[sandbox.environment.TOKEN] in {}", project.display()),
            &format!("env_passthrough = [\"TOKEN\"] in {}", global.display()),
        ],
    );
}

#[test]
fn a_missing_host_variable_is_a_warning_naming_the_key_and_the_variable() {
    let h = Home::new();
    let global = h.global(
        "[sandbox.environment.FROM_HOST]\nenv = \"AIRLOCK_TEST_SURELY_UNSET_VARIABLE\"\n\
         [sandbox.environment.HAS_PATH]\nenv = \"PATH\"\n",
    );
    let loaded = h.load().expect("loads: a missing variable is no error");
    let warnings = loaded.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_contains(
        &warnings[0],
        &[
            &global.display().to_string(),
            "[sandbox.environment.FROM_HOST] env = \"AIRLOCK_TEST_SURELY_UNSET_VARIABLE\"",
            "so FROM_HOST is not set in the sandbox",
        ],
    );
}

#[test]
fn config_show_names_each_entrys_file_and_never_a_secret() {
    let h = Home::new();
    let global = h.global(
        "[sandbox.environment.A]\nvalue = \"plain\"\n[sandbox.environment.B]\nfile = \"~/.b\"\n",
    );
    h.file(".b", "s3cret\n");
    let project = h.trusted_project("[sandbox.environment.C]\nenv = \"HOST_C\"\n");
    let shown = airlock_config::render_profile(&h.load().expect("loads").profile);
    let expected = format!(
        "\n# from {:?}\n[sandbox.environment.A]\nvalue = \"plain\"\n\
         \n# from {:?}\n[sandbox.environment.B]\nfile = \"~/.b\"\n\
         \n# from {:?}\n[sandbox.environment.C]\nenv = \"HOST_C\"\n",
        global, global, project
    );
    assert!(shown.contains(&expected), "{shown}");
    assert!(!shown.contains("s3cret"), "{shown}");
}

#[test]
fn file_paths_resolve_against_home_and_the_declaring_file() {
    let h = Home::new();
    let var = |file: &str, origin: &Path| EnvironmentVar {
        source: EnvSource::File(file.into()),
        origin: origin.to_path_buf(),
    };
    let global = h.paths.config_file();
    let project_file = h.project.join(".airlock.toml");
    assert_eq!(
        var("token", &global).file_path(&h.paths),
        Some(h.home().join(".config/airlock/token"))
    );
    assert_eq!(
        var("~/.secrets/t", &project_file).file_path(&h.paths),
        Some(h.home().join(".secrets/t"))
    );
    assert_eq!(
        var("./keys/../keys/t", &project_file).file_path(&h.paths),
        Some(h.project.join("keys/t"))
    );
    assert_eq!(
        var("/etc/x", &project_file).file_path(&h.paths),
        Some(PathBuf::from("/etc/x"))
    );
    let value = EnvironmentVar {
        source: EnvSource::Value("x".into()),
        origin: global,
    };
    assert_eq!(value.file_path(&h.paths), None);
}

#[test]
fn file_values_lose_one_trailing_newline_and_keep_the_rest() {
    let h = Home::new();
    let read = |text: &[u8]| {
        let f = h.home().join("v");
        fs::write(&f, text).expect("write");
        read_file_value(&f, &h.project)
    };
    assert_eq!(read(b"tok\n").as_deref(), Ok("tok"));
    assert_eq!(read(b"tok\r\n").as_deref(), Ok("tok"));
    assert_eq!(read(b"tok\n\n").as_deref(), Ok("tok\n"));
    assert_eq!(read(b"a\nb").as_deref(), Ok("a\nb"));
    assert_eq!(read(b"").as_deref(), Ok(""));
    let max = vec![b'x'; 64 * 1024];
    assert_eq!(read(&max).map(|v| v.len()), Ok(64 * 1024));
    let mut over = max.clone();
    over.push(b'x');
    assert_contains(
        &read(&over).expect_err("too big"),
        &["larger than 65536 bytes"],
    );
    assert_contains(&read(b"\xff\xfe").expect_err("binary"), &["not UTF-8"]);
    assert_contains(&read(b"a\0b").expect_err("NUL"), &["NUL byte"]);
}

#[test]
fn only_regular_files_are_read_and_nothing_blocks() {
    let h = Home::new();
    let missing = read_file_value(&h.home().join("nope"), &h.project);
    assert_eq!(missing, Err("it does not exist".into()));
    let dir = read_file_value(h.home(), &h.project).expect_err("a directory");
    assert_contains(&dir, &["a directory, not a regular file"]);
    let fifo = h.home().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("c");
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let err = read_file_value(&fifo, &h.project).expect_err("a FIFO");
    assert_contains(&err, &["FIFO"]);
}

#[test]
fn symlinks_are_followed_outside_the_project_and_never_inside_it() {
    let h = Home::new();
    let secret = h.file(".ssh/id_ed25519", "PRIVATE KEY\n");
    // Outside the project: the user's own link (a dotfile manager's) is followed.
    let link = h.home().join(".token");
    std::os::unix::fs::symlink(&secret, &link).expect("symlink");
    assert_eq!(
        read_file_value(&link, &h.project).as_deref(),
        Ok("PRIVATE KEY")
    );
    // Inside the project, which the sandbox writes: a planted link is refused, final or not.
    let planted = h.project.join("token");
    std::os::unix::fs::symlink(&secret, &planted).expect("symlink");
    let err = read_file_value(&planted, &h.project).expect_err("refused");
    assert_contains(
        &err,
        &["symlink inside the project", "follows no symlink there"],
    );
    std::os::unix::fs::symlink(h.home().join(".ssh"), h.project.join("keys")).expect("dir link");
    let err = read_file_value(&h.project.join("keys/id_ed25519"), &h.project).expect_err("dir");
    assert_contains(&err, &["symlink inside the project"]);
    // A regular file inside the project is read.
    h.file("work/app/.token", "tok\n");
    assert_eq!(
        read_file_value(&h.project.join(".token"), &h.project).as_deref(),
        Ok("tok")
    );
}

#[test]
fn read_files_reads_each_file_source_by_name() {
    let h = Home::new();
    h.global(
        "[sandbox.environment.A]\nfile = \"a.txt\"\n[sandbox.environment.B]\nfile = \"~/missing\"\n\
         [sandbox.environment.C]\nvalue = \"c\"\n",
    );
    h.file(".config/airlock/a.txt", "from a\n");
    let profile = h.load().expect("loads").profile;
    let files = airlock_config::read_environment_files(&profile, &h.paths, &h.project);
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files["A"].value.as_deref(), Ok("from a"));
    assert_eq!(files["A"].path, h.home().join(".config/airlock/a.txt"));
    assert_eq!(files["B"].value, Err("it does not exist".into()));
}
