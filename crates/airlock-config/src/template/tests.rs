//! Tests of the `config init` template and `config show` rendering.
use super::*;
use crate::{
    ConfigFile, EgressPreset, EgressRule, MountMode, MountSelector, NetworkMode, OverlayDefault,
    ProfileMount, ToolSetting, ToolValue, parse_str,
};
use std::path::{Path, PathBuf};

#[test]
fn template_parses_to_an_empty_config() {
    let cfg = parse_str(init_template(), Path::new("template.toml")).unwrap();
    assert_eq!(cfg, ConfigFile::default());
}

#[test]
fn template_defaults_match_the_code() {
    let uncommented: String = init_template()
        .lines()
        .map(|l| match l.strip_prefix('#') {
            Some(rest) if rest.starts_with(|c: char| c.is_ascii_lowercase()) => rest,
            _ => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let cfg = parse_str(&uncommented, Path::new("template.toml")).unwrap();
    let s = &cfg.sandbox;
    assert!(s.network.is_some() && s.hide_env_files.is_some() && s.nested_namespaces.is_some());
    let n = &cfg.network;
    assert!(n.preset.is_some() && n.allow_private.is_some());
    let origin = Path::new("template.toml");
    let mut layered = Profile::layer(None, Some((origin, &cfg)));
    // Unset means $AIRLOCK_BACKEND, else native: the template shows the latter.
    assert_eq!(layered.backend, Some(crate::BackendKind::Native));
    layered.backend = None;
    assert_eq!(layered, Profile::default());
}

#[test]
fn template_documents_every_key_and_mode() {
    let t = init_template();
    for key in [
        "[sandbox]",
        "network =",
        "hide_env_files =",
        "env_passthrough =",
        "nested_namespaces =",
        "bridge =",
        "[bridge.commands.mytool]",
        "[[sandbox.mounts]]",
        "path =",
        "pattern =",
        "mode =",
        "\"host\"",
        "\"none\"",
        "\"proxy\"",
        "[network]",
        "preset =",
        "allow =",
        "deny =",
        "allow_private =",
        "resolve =",
        "\"balanced\"",
        "\"allow-all\"",
        "\"deny-all\"",
        "[overlay]",
        "default =",
        "[tools.git]",
        "mount_mode =",
        "allow_hooks =",
        "trust_config_changes =",
    ] {
        assert!(t.contains(key), "template lacks {key}");
    }
    for mode in [
        MountMode::Readonly,
        MountMode::Readwrite,
        MountMode::Hidden,
        MountMode::Tmpfs,
        MountMode::Overlay,
        MountMode::Tmpoverlay,
    ] {
        assert!(t.contains(&format!("\"{}\"", mode.as_str())), "{mode:?}");
    }
    // The mount examples (a path, then a pattern), uncommented, are valid too.
    let example = |skip: usize| -> String {
        t.lines()
            .skip_while(|l| !l.contains("[[sandbox.mounts]]"))
            .skip(skip)
            .skip_while(|l| !l.contains("[[sandbox.mounts]]"))
            .take_while(|l| !l.is_empty())
            .map(|l| format!("{}\n", l.trim_start_matches("# ")))
            .collect()
    };
    for (skip, key) in [(0, "path"), (1, "pattern")] {
        let cfg = parse_str(&example(skip), Path::new("example.toml")).unwrap();
        assert_eq!(cfg.sandbox.mounts.len(), 1);
        let selector = cfg.sandbox.mounts[0].selector().expect("one of them");
        assert_eq!(selector.key(), key);
    }
}

#[test]
fn default_profile_renders_exactly() {
    assert_eq!(
        render_profile(&Profile::default()),
        "[sandbox]\n\
         network = \"proxy\"\n\
         hide_env_files = true\n\
         hide = []\n\
         env_passthrough = []\n\
         nested_namespaces = false\n\
         bridge = true\n\
         \n\
         [network]\n\
         preset = \"balanced\"\n\
         allow = []\n\
         deny = []\n\
         allow_private = false\n\
         resolve = {}\n\
         unmatched = \"deny\"\n\
         ask_timeout = 60\n\
         ask_notify = true\n\
         \n\
         [overlay]\n\
         default = \"split\"\n"
    );
}

#[test]
fn rendered_profile_parses_back_to_the_same_profile() {
    let profile = Profile {
        backend: Some(crate::BackendKind::Container),
        container: crate::container::ContainerSettings {
            engine: Some(crate::container::EngineName::Docker),
            image: Some("localhost/my-image:1".into()),
            keep: true,
        },
        network: NetworkMode::None,
        hide_env_files: false,
        hide: vec!["*.pem".into(), "/config/master.key".into()],
        env_passthrough: vec!["TERM".into(), "WEIRD\"NAME\\".into()],
        environment: [
            ("A_VALUE", crate::EnvSource::Value("x\"\ny".into())),
            ("FROM_HOST", crate::EnvSource::Env("GH_TOKEN".into())),
            ("_FILE", crate::EnvSource::File("~/a b/\"t\"".into())),
        ]
        .into_iter()
        .map(|(name, source)| {
            let origin = PathBuf::from("/p/evil\n[sandbox.environment.X]\n/.airlock.toml");
            (name.to_owned(), crate::EnvironmentVar { source, origin })
        })
        .collect(),
        nested_namespaces: true,
        resources: crate::resources::Resources {
            memory: Some(2 << 30),
            cpus_milli: Some(1500),
            pids: Some(512),
            tmp_size: Some(crate::resources::TmpSize::Percent(20)),
        },
        bridge: false,
        bridge_commands: Vec::new(),
        bridge_credential_hosts: Vec::new(),
        mounts: vec![
            ProfileMount {
                selector: MountSelector::Path("~/a b".into()),
                mode: MountMode::Readonly,
                origin: PathBuf::from("/home/u/.config/airlock/config.toml"),
                entry: 1,
            },
            ProfileMount {
                selector: MountSelector::Pattern("/x\n\"y\"/**/*.key".into()),
                mode: MountMode::Overlay,
                origin: PathBuf::from("/p/evil\n[sandbox]\n/.airlock.toml"),
                entry: 2,
            },
        ],
        egress: EgressSettings {
            preset: EgressPreset::DenyAll,
            allow: vec![EgressRule {
                rule: "*.example.com:443".into(),
                origin: PathBuf::from("/p/evil\n]\n/.airlock.toml"),
            }],
            deny: vec![EgressRule {
                rule: "evil\"\n.com".into(),
                origin: PathBuf::from("/g.toml"),
            }],
            allow_private: true,
            resolve: [("db.internal".to_owned(), "10.0.0.5".parse().unwrap())].into(),
            upstream_proxy: Some("http://proxy.corp:3128".into()),
            unmatched: crate::Unmatched::Ask,
            ask_timeout: 5,
            ask_notify: false,
        },
        credentials: [
            crate::credentials::Credential {
                name: "we-ird".into(),
                hosts: vec!["api.example.com".into(), "b.test".into()],
                header: "x-api-key".into(),
                value_format: "Key \"{value}\"".into(),
                source: crate::credentials::CredentialSource::Command(vec![
                    "pass".into(),
                    "show \"x\"\n".into(),
                ]),
                placeholder_env: None,
                placeholder: "airlock-placeholder".into(),
                origin: PathBuf::from("/g\n[network]\n.toml"),
            },
            crate::credentials::Credential {
                name: "k".into(),
                hosts: vec!["k.test".into()],
                header: "authorization".into(),
                value_format: "Basic {basic:u}".into(),
                source: crate::credentials::CredentialSource::Keychain {
                    service: "svc".into(),
                    account: Some("me".into()),
                },
                placeholder_env: Some("K_TOKEN".into()),
                placeholder: "placeholder-k".into(),
                origin: PathBuf::from("/g.toml"),
            },
        ]
        .into_iter()
        .map(|c| (c.name.clone(), c))
        .collect(),
        overlay_default: OverlayDefault::Tmpoverlay,
        ports: vec![crate::ports::PortRule {
            host: 8080,
            sandbox: 3000,
            direction: crate::ports::PortDirection::Out,
            origin: PathBuf::from("/p/evil\n[[network.ports]]\n/.airlock.toml"),
            entry: 1,
        }],
        tools: [(
            "we ird\"tool".to_owned(),
            [
                ("mode".to_owned(), ToolValue::String("a\"\nb".into())),
                ("on".to_owned(), ToolValue::Bool(true)),
                ("n".to_owned(), ToolValue::Integer(-3)),
                ("list".to_owned(), ToolValue::Strings(vec!["x\n".into()])),
            ]
            .into_iter()
            .map(|(k, value)| {
                let origin = PathBuf::from("/p/evil\n[tools]\n/.airlock.toml");
                (k, ToolSetting { value, origin })
            })
            .collect(),
        )]
        .into(),
    };
    let text = render_profile(&profile);
    assert!(
        text.contains("# from \"/home/u/.config/airlock/config.toml\""),
        "{text}"
    );
    let origin = Path::new("shown.toml");
    let cfg = parse_str(&text, origin).unwrap();
    let back = Profile::layer(None, Some((origin, &cfg)));
    let mut expected = profile.clone();
    for m in &mut expected.mounts {
        m.origin = origin.to_path_buf();
    }
    for r in expected
        .egress
        .allow
        .iter_mut()
        .chain(&mut expected.egress.deny)
    {
        r.origin = origin.to_path_buf();
    }
    for r in &mut expected.ports {
        r.origin = origin.to_path_buf();
    }
    for setting in expected
        .tools
        .values_mut()
        .flat_map(|keys| keys.values_mut())
    {
        setting.origin = origin.to_path_buf();
    }
    for var in expected.environment.values_mut() {
        var.origin = origin.to_path_buf();
    }
    for cred in expected.credentials.values_mut() {
        cred.origin = origin.to_path_buf();
    }
    assert_eq!(back, expected);
}
