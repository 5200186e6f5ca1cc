use std::path::Path;

use super::*;

fn cli(root: &Path) -> AirlockCli {
    AirlockCli {
        bin: PathBuf::from("/nonexistent/airlock"),
        records: Records {
            dir: root.join("records"),
            clones: root.join("clones"),
        },
        timeout: Duration::from_secs(5),
        slow_timeout: Duration::from_secs(5),
    }
}

fn record(cli: &AirlockCli, name: &str, local: &Path) -> SandboxRecord {
    let project = cli
        .records
        .clone_path(name, &local.display().to_string())
        .expect("path");
    SandboxRecord {
        version: RECORD_VERSION,
        name: name.into(),
        local_path: local.display().to_string(),
        project: project.display().to_string(),
        clone: true,
        publish: vec!["8080:3000".into()],
        created_at: "now".into(),
        pids: vec![],
    }
}

#[test]
fn a_session_is_airlock_run_of_the_project_with_a_direct_argv() {
    let tmp = tempfile::tempdir().expect("tmp");
    let c = cli(tmp.path());
    let r = record(&c, "herdr-x-1", Path::new("/src/app"));
    let args = AirlockCli::run_args(
        &r,
        &["sh".into(), "-c".into(), "echo $HOME; rm -rf /".into()],
    );
    assert_eq!(
        args,
        [
            "run",
            "--project",
            &r.project,
            "--git-mode",
            "readwrite",
            "--publish",
            "8080:3000",
            "--",
            "sh",
            "-c",
            "echo $HOME; rm -rf /"
        ]
    );
}

#[test]
fn copy_takes_only_a_regular_file_directly_in_the_project() {
    let tmp = tempfile::tempdir().expect("tmp");
    let c = cli(tmp.path());
    let r = record(&c, "herdr-x-1", Path::new("/src/app"));
    c.records.save(&r).expect("save");
    let project = PathBuf::from(&r.project);
    std::fs::create_dir_all(project.join("sub")).expect("mkdir");
    std::fs::write(project.join("b.bundle"), "bundle").expect("write");
    std::fs::write(tmp.path().join("secret"), "host").expect("write");
    std::os::unix::fs::symlink(tmp.path().join("secret"), project.join("link.bundle"))
        .expect("link");
    let out = tmp.path().join("out");
    let dest = out.display().to_string();
    c.copy(&format!("herdr-x-1:{}/b.bundle", r.project), &dest)
        .expect("copied");
    assert_eq!(std::fs::read_to_string(&out).expect("read"), "bundle");
    for bad in [
        format!("herdr-x-1:{}/link.bundle", r.project),
        format!("herdr-x-1:{}/sub/../../../secret", r.project),
        format!("herdr-x-1:{}/secret", tmp.path().display()),
        format!("../x:{}/b.bundle", r.project),
        "no-colon".to_owned(),
    ] {
        let _ = std::fs::remove_file(&out);
        assert!(c.copy(&bad, &dest).is_err(), "{bad}");
        assert!(!out.exists(), "{bad} wrote nothing");
    }
}

#[test]
fn sbx_only_keys_are_refused_by_name() {
    let mut request = CreateRequest {
        name: "herdr-x-1".into(),
        paths: vec!["/src/app".into()],
        ..CreateRequest::default()
    };
    refuse_sbx_only(&request).expect("nothing sbx-only");
    request.memory = Some("8g".into());
    request.deny_network = vec!["example.com".into()];
    request.paths.push("/data:ro".into());
    let e = refuse_sbx_only(&request).expect_err("refused");
    assert_eq!(e.kind, ErrorKind::Config);
    assert!(
        e.message.contains("memory, denyNetwork, extraWorkspaces"),
        "{}",
        e.message
    );
}
