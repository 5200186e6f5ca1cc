//! Shells, prompts, editors and language tools against fixture homes.

mod fixture;

use airlock_config::NetworkMode;
use airlock_sandbox::{Contributions, ToolMountMode::*};
use airlock_tools::Settings;
use fixture::{Fixture, env, settings};

#[test]
fn mise_dirs_are_read_only_with_the_lookup_timeout_behind_the_proxy() {
    let f = Fixture::new();
    f.binary("mise");
    f.dir(".local/bin");
    f.dir(".config/mise");
    f.dir(".local/share/mise/installs");
    // ~/.local/state/mise absent.
    let expected_mounts = vec![
        f.mount("mise", ".local/bin", Readonly, true),
        f.mount("mise", ".config/mise", Readonly, true),
        f.mount("mise", ".local/share/mise", Readonly, true),
    ];
    assert_eq!(
        f.plan(&["mise"]),
        Contributions {
            mounts: expected_mounts.clone(),
            env: env(&[
                ("MISE_FETCH_REMOTE_VERSIONS_TIMEOUT", "3s"),
                ("MISE_DISABLE_UPDATE_WARNING", "1"),
            ]),
            ..Contributions::default()
        }
    );
    for network in [NetworkMode::None, NetworkMode::Proxy] {
        let plan = f.plan_with(&["mise"], &Settings::default(), network);
        assert!(plan.env.contains_key("MISE_FETCH_REMOTE_VERSIONS_TIMEOUT"));
        assert!(plan.env.contains_key("MISE_DISABLE_UPDATE_WARNING"));
    }
    let host = f.plan_with(&["mise"], &Settings::default(), NetworkMode::Host);
    assert_eq!(host.env, env(&[]));
    assert_eq!(host.mounts, expected_mounts);
}

#[test]
fn mise_mount_mode_and_ignore_global_config() {
    let f = Fixture::new();
    f.binary("mise");
    f.dir(".local/share/mise");
    let s =
        settings("[tools.mise]\nmount_mode = \"overlay\"\nignore_global_config = true\n").unwrap();
    let plan = f.plan_with(&["mise"], &s, NetworkMode::Host);
    assert_eq!(
        plan.mounts,
        vec![f.mount("mise", ".local/share/mise", Overlay, true)]
    );
    assert_eq!(plan.env, env(&[("MISE_GLOBAL_CONFIG_FILE", "/dev/null")]));
    let s = settings("[tools.mise]\nmount_mode = \"tmpoverlay\"\n").unwrap();
    let plan = f.plan_with(&["mise"], &s, NetworkMode::Host);
    assert_eq!(
        plan.mounts,
        vec![f.mount("mise", ".local/share/mise", Tmpoverlay, true)]
    );
}

#[test]
fn mise_honours_its_dir_variables() {
    let mut f = Fixture::new();
    f.binary("mise");
    let data = f.dir("opt/mise-data");
    f.set_env("MISE_DATA_DIR", data.to_str().unwrap());
    let plan = f.plan_with(&["mise"], &Settings::default(), NetworkMode::Host);
    assert_eq!(
        plan.mounts,
        vec![f.mount("mise", "opt/mise-data", Readonly, true)]
    );
    assert_eq!(plan.env, env(&[("MISE_DATA_DIR", data.to_str().unwrap())]));
}

#[test]
fn shell_rc_files_are_read_only() {
    let mut f = Fixture::new();
    for b in ["bash", "zsh", "fish"] {
        f.binary(b);
    }
    f.file(".bashrc", "");
    f.file(".profile", "");
    f.file(".zshrc", "");
    f.dir(".config/fish");
    assert_eq!(
        f.plan(&["bash", "zsh", "fish"]).mounts,
        vec![
            f.mount("bash", ".bashrc", Readonly, false),
            f.mount("bash", ".profile", Readonly, false),
            f.mount("fish", ".config/fish", Readonly, true),
            f.mount("zsh", ".zshrc", Readonly, false),
        ]
    );
    let zdot = f.dir("zdot");
    f.file("zdot/.zshenv", "");
    f.set_env("ZDOTDIR", zdot.to_str().unwrap());
    let plan = f.plan(&["zsh"]);
    assert_eq!(
        plan.mounts,
        vec![f.mount("zsh", "zdot/.zshenv", Readonly, false)]
    );
    assert_eq!(plan.env, env(&[("ZDOTDIR", zdot.to_str().unwrap())]));
}

#[test]
fn nvim_config_data_state_read_only() {
    let f = Fixture::new();
    f.binary("nvim");
    f.dir(".config/nvim");
    f.dir(".local/share/nvim");
    f.dir(".local/state/nvim");
    assert_eq!(
        f.plan(&["nvim"]).mounts,
        vec![
            f.mount("nvim", ".config/nvim", Readonly, true),
            f.mount("nvim", ".local/share/nvim", Readonly, true),
            f.mount("nvim", ".local/state/nvim", Readonly, true),
        ]
    );
}

#[test]
fn starship_gets_a_generated_config_with_the_sandbox_segment() {
    let f = Fixture::new();
    f.binary("starship");
    f.file(".config/starship.toml", "add_newline = false\n");
    let plan = f.plan(&["starship"]);
    let target = f.h(".config/starship.toml");
    assert_eq!(
        plan.env,
        env(&[("STARSHIP_CONFIG", target.to_str().unwrap())])
    );
    assert!(plan.mounts.is_empty());
    let [file] = plan.files.as_slice() else {
        panic!("one file expected: {:?}", plan.files)
    };
    assert_eq!((file.tool.as_str(), &file.target), ("starship", &target));
    let t: toml::Table = file.content.parse().unwrap();
    assert_eq!(t["add_newline"].as_bool(), Some(false));
    assert_eq!(t["format"].as_str(), Some("${custom.airlock}$all"));
    assert_eq!(t["custom"]["airlock"]["style"].as_str(), Some("bold red"));
}

#[test]
fn starship_with_a_broken_config_warns_and_still_marks_the_prompt() {
    let f = Fixture::new();
    f.binary("starship");
    f.file(".config/starship.toml", "format = [");
    let plan = f.plan(&["starship"]);
    assert_eq!(plan.files.len(), 1);
    assert!(plan.files[0].content.contains("custom"));
    assert_eq!(plan.warnings.len(), 1, "{:?}", plan.warnings);
    assert!(
        plan.warnings[0].contains("~/.config/starship.toml"),
        "{:?}",
        plan.warnings
    );
}

#[test]
fn tmux_config_is_copied_with_a_red_sandbox_status() {
    let f = Fixture::new();
    f.binary("tmux");
    f.file(".tmux.conf", "set -g mouse on");
    f.dir(".tmux/plugins");
    let plan = f.plan(&["tmux"]);
    assert_eq!(plan.mounts, vec![f.mount("tmux", ".tmux", Overlay, true)]);
    let [file] = plan.files.as_slice() else {
        panic!("one file expected: {:?}", plan.files)
    };
    assert_eq!(file.target, f.h(".tmux.conf"));
    assert!(
        file.content.starts_with("set -g mouse on\n"),
        "{}",
        file.content
    );
    assert!(file.content.contains("[SANDBOX]") && file.content.contains("bg=red"));
}

#[test]
fn tmux_xdg_config_is_the_one_replaced_when_it_is_the_only_one() {
    let f = Fixture::new();
    f.binary("tmux");
    f.file(".config/tmux/tmux.conf", "set -g base-index 1\n");
    let plan = f.plan(&["tmux"]);
    assert_eq!(
        plan.mounts,
        vec![f.mount("tmux", ".config/tmux", Tmpoverlay, true)]
    );
    assert_eq!(plan.files[0].target, f.h(".config/tmux/tmux.conf"));
    assert!(plan.files[0].content.starts_with("set -g base-index 1\n"));
}

#[test]
fn prompt_frameworks_are_detected_by_their_files() {
    let f = Fixture::new();
    f.dir(".oh-my-zsh/custom");
    f.file(".p10k.zsh", "");
    f.dir(".cache/gitstatus");
    f.binary("oh-my-posh");
    f.dir(".config/oh-my-posh");
    assert_eq!(
        f.plan(&["oh-my-zsh", "powerlevel10k", "oh-my-posh"]).mounts,
        vec![
            f.mount("oh-my-posh", ".config/oh-my-posh", Tmpoverlay, true),
            f.mount("oh-my-zsh", ".oh-my-zsh", Overlay, true),
            f.mount("powerlevel10k", ".p10k.zsh", Readonly, false),
            f.mount("powerlevel10k", ".cache/gitstatus", Overlay, true),
        ]
    );
}

#[test]
fn go_and_node_keep_their_caches_and_globals_in_the_sandbox_home() {
    let mut f = Fixture::new();
    f.binary("go");
    f.binary("node");
    f.set_env("PATH", &format!("{}:/usr/bin", f.bin.display()));
    // The host's global npmrc (a company's registry and CA), with a token that must stay out.
    let corp = f.root.join("corp");
    std::fs::create_dir_all(&corp).unwrap();
    let ca = corp.join("ca.pem");
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let npmrc = corp.join("npmrc");
    std::fs::write(
        &npmrc,
        format!(
            "cafile={}\n//npm.corp.example/:_authToken=SECRET\n",
            ca.display()
        ),
    )
    .unwrap();
    f.set_env("NPM_CONFIG_GLOBALCONFIG", &npmrc.display().to_string());
    let plan = f.plan(&["go", "node"]);
    let h = |rel: &str| f.h(rel).to_string_lossy().into_owned();
    assert_eq!(
        plan,
        Contributions {
            env: env(&[
                ("GOPATH", &h("go")),
                ("GOCACHE", &h(".cache/go-build")),
                ("GOMODCACHE", &h(".cache/go-mod")),
                ("GOTOOLCHAIN", "local"),
                ("NPM_CONFIG_PREFIX", &h(".npm-global")),
                (
                    "PATH",
                    &format!(
                        "{}:{}:{}:/usr/bin",
                        h("go/bin"),
                        h(".npm-global/bin"),
                        f.bin.display()
                    )
                ),
            ]),
            files: vec![airlock_sandbox::GeneratedFile {
                tool: "node".into(),
                target: f.h(".npm-global/etc/npmrc"),
                content: format!(
                    "# The host's global npmrc, without credentials (airlock).\ncafile={}\n",
                    ca.display()
                ),
            }],
            mounts: vec![airlock_sandbox::ToolMount {
                tool: "node".into(),
                source: ca.clone(),
                target: ca.clone(),
                mode: Readonly,
                is_dir: false,
            }],
            ..Contributions::default()
        }
    );
}

#[test]
fn python_is_detected_and_adds_nothing() {
    let f = Fixture::new();
    f.binary("python3");
    assert_eq!(f.plan(&["python"]), Contributions::default());
    let report = airlock_tools::report::list(
        &airlock_tools::Catalog::builtin().retain(&["python"]),
        &Settings::default(),
        &f.host(),
        false,
    );
    assert_eq!(report.len(), 1);
    assert_eq!(
        report[0].binary.as_deref(),
        Some(f.bin.join("python3").as_path())
    );
}

#[test]
fn a_non_executable_file_on_path_is_not_a_binary() {
    let f = Fixture::new();
    std::fs::write(f.bin.join("go"), "").unwrap();
    assert_eq!(f.plan(&["go"]), Contributions::default());
}

#[test]
fn only_the_login_shell_brings_its_startup_files() {
    let mut f = Fixture::new();
    for b in ["bash", "zsh"] {
        f.binary(b);
    }
    f.file(".bashrc", "");
    f.file(".zshrc", "");
    f.set_env("SHELL", "/usr/bin/zsh");
    assert_eq!(
        f.plan(&["bash", "zsh"]).mounts,
        vec![f.mount("zsh", ".zshrc", Readonly, false)]
    );
    let report = airlock_tools::report::check(
        &airlock_tools::Catalog::builtin(),
        &Settings::default(),
        &f.host(),
        &["bash".into()],
    );
    assert_eq!(report.tools[0].status, airlock_tools::Status::Missing);
    assert_eq!(
        report.tools[0].problems,
        ["bash is not your $SHELL (/usr/bin/zsh); its startup files are not mounted"]
    );
}

#[test]
fn shell_init_lists_the_lines_of_available_tools_for_that_shell() {
    let f = Fixture::new();
    f.binary("mise");
    f.binary("starship");
    f.dir(".oh-my-zsh");
    let catalog = airlock_tools::Catalog::builtin();
    let lines = airlock_tools::shell_init(
        &catalog,
        &Settings::default(),
        &f.host(),
        airlock_tools::Shell::Zsh,
    );
    let tools: Vec<&str> = lines.iter().map(|(tool, _)| *tool).collect();
    assert_eq!(tools, ["mise", "oh-my-zsh", "starship"]);
    assert_eq!(
        lines[0].1,
        r#"if command -v mise &>/dev/null; then eval "$(mise activate zsh)"; fi"#
    );
    let fish = airlock_tools::shell_init(
        &catalog,
        &Settings::default(),
        &f.host(),
        airlock_tools::Shell::Fish,
    );
    assert_eq!(
        fish,
        [
            (
                "mise",
                "if command -q mise; mise activate fish | source; end"
            ),
            ("starship", "starship init fish | source")
        ]
    );
}
