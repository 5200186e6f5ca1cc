//! Exec bodies: strict, only ExecConfig's keys, never privileged, root only when configured.

use super::super::exec::is_root;
use super::super::{Denial, DockerPolicy, decide};
use super::READ_ONLY;

const EXEC: &str = "/v1.47/containers/web-1/exec";
const ROOT_OK: DockerPolicy = DockerPolicy {
    allow_root_exec: true,
};

fn exec(body: &str, policy: &DockerPolicy) -> Result<(), Denial> {
    decide("POST", EXEC, body.as_bytes(), policy).map(|f| {
        assert_eq!(f.path_and_query, EXEC);
        assert!(!f.upgrade_allowed);
    })
}

fn refused(body: &str) -> Denial {
    exec(body, &READ_ONLY).expect_err(body)
}

#[test]
fn what_the_docker_cli_sends_is_allowed() {
    // `docker exec -it -u node web-1 sh`, as the Go client encodes it (a trailing newline).
    let cli = r#"{"User":"node","Privileged":false,"Tty":true,"ConsoleSize":[40,120],"AttachStdin":true,"AttachStderr":true,"AttachStdout":true,"Detach":false,"DetachKeys":"","Env":null,"WorkingDir":"","Cmd":["sh"]}
"#;
    exec(cli, &READ_ONLY).unwrap();
    exec(r#"{"Cmd":["ls"],"Env":["A=1"],"User":""}"#, &READ_ONLY).unwrap();
    exec(
        r#"{"Cmd":["ls"],"User":null,"Privileged":null}"#,
        &READ_ONLY,
    )
    .unwrap();
    exec("{}", &READ_ONLY).unwrap();
    exec(" \r\n{}\n", &READ_ONLY).unwrap();
}

#[test]
fn privileged_is_refused_whatever_the_policy() {
    for body in [
        r#"{"Privileged":true}"#,
        r#"{"Cmd":["sh"],"Privileged":true}"#,
    ] {
        for policy in [READ_ONLY, ROOT_OK] {
            let d = exec(body, &policy).unwrap_err();
            assert_eq!(
                (d.status, d.reason),
                (403, "exec with Privileged is refused")
            );
        }
    }
    // Not a bool: Go would refuse it too, and it is not `false`.
    for body in [
        r#"{"Privileged":"true"}"#,
        r#"{"Privileged":1}"#,
        r#"{"Privileged":[true]}"#,
    ] {
        let d = refused(body);
        assert_eq!(
            (d.status, d.reason),
            (400, "exec body has a field of the wrong type")
        );
    }
    // Go matches keys case-insensitively (with Unicode folding): other spellings are refused.
    for body in [
        r#"{"privileged":true}"#,
        r#"{"PRIVILEGED":true}"#,
        r#"{"Privileged ":true}"#,
        "{\"Privileged\u{17f}\":true}",
        "{\"U\u{17f}er\":\"root\"}",
    ] {
        let d = refused(body);
        assert_eq!(
            (d.status, d.reason),
            (403, "exec body has a key outside ExecConfig")
        );
    }
}

#[test]
fn duplicate_and_case_variant_keys_are_refused() {
    for body in [
        r#"{"Privileged":false,"Privileged":true}"#,
        r#"{"Privileged":false,"\u0050rivileged":true}"#,
        r#"{"Privileged":false,"privileged":true}"#,
        r#"{"User":"node","User":"root"}"#,
    ] {
        let d = refused(body);
        assert_eq!(
            (d.status, d.reason),
            (400, "exec body repeats a key"),
            "{body}"
        );
    }
}

#[test]
fn root_is_refused_unless_configured() {
    for user in [
        "root",
        "0",
        "00",
        "+0",
        "-0",
        "0:0",
        "root:root",
        "root:1000",
        "0:1000",
        "root:",
    ] {
        let body = format!(r#"{{"Cmd":["id"],"User":"{user}"}}"#);
        let d = exec(&body, &READ_ONLY).unwrap_err();
        assert_eq!(
            (d.status, d.reason),
            (
                403,
                "exec as root is refused ([tools.docker] allow_root_exec)"
            ),
            "{user}"
        );
        exec(&body, &ROOT_OK).unwrap();
    }
    // Another user, with the root group or not; names are case-sensitive (`ROOT` is not root).
    for user in [
        "node",
        "1000",
        "1000:0",
        "node:root",
        ":0",
        "ROOT",
        "Root",
        "root2",
        "10",
        "0x0",
        " 0",
    ] {
        assert!(!is_root(user), "{user}");
        exec(&format!(r#"{{"User":"{user}"}}"#), &READ_ONLY).unwrap();
    }
}

#[test]
fn what_is_not_one_strict_execconfig_object_is_refused() {
    let not_object = "exec body is not one strict JSON object";
    for (body, status, reason) in [
        ("", 400, not_object),
        ("[]", 400, not_object),
        ("\"x\"", 400, not_object),
        ("{", 400, not_object),
        ("{} {}", 400, not_object),
        ("{}x", 400, not_object),
        (r#"{"Cmd":["a"]}"#, 0, ""),
        // The Python SDK's extra key (the engine goes by the path).
        (r#"{"Container":"x"}"#, 0, ""),
        (
            r#"{"container":"x"}"#,
            403,
            "exec body has a key outside ExecConfig",
        ),
        (
            r#"{"HostConfig":{"Privileged":true}}"#,
            403,
            "exec body has a key outside ExecConfig",
        ),
        (
            r#"{"Cmd":"ls"}"#,
            400,
            "exec body has a field of the wrong type",
        ),
        (
            r#"{"Cmd":[1]}"#,
            400,
            "exec body has a field of the wrong type",
        ),
        (
            r#"{"User":0}"#,
            400,
            "exec body has a field of the wrong type",
        ),
        (
            r#"{"ConsoleSize":[1]}"#,
            400,
            "exec body has a field of the wrong type",
        ),
        (
            r#"{"ConsoleSize":[-1,2]}"#,
            400,
            "exec body has a field of the wrong type",
        ),
        (
            r#"{"Env":[["A=1"]]}"#,
            400,
            "exec body has a field of the wrong type",
        ),
    ] {
        match exec(body, &READ_ONLY) {
            Ok(()) => assert_eq!(status, 0, "{body:?} allowed"),
            Err(d) => assert_eq!((d.status, d.reason), (status, reason), "{body:?}"),
        }
    }
    let deep = format!("{{\"Env\":{}{}}}", "[".repeat(9), "]".repeat(9));
    assert_eq!(refused(&deep).reason, "exec body is nested too deeply");
    let not_utf8 = decide("POST", EXEC, b"{\"Cmd\":[\"\xff\"]}", &READ_ONLY).unwrap_err();
    assert_eq!(not_utf8.status, 400);
}
