//! The allowlist, every entry and its neighbours, and every normalisation trick.

use super::super::{NOT_ALLOWED, normalise};
use super::{allowed, denied};

const ID: &str = "4f1c2a9b8e7d";

fn reads() -> Vec<String> {
    let mut paths: Vec<String> = [
        "/_ping",
        "/version",
        "/info",
        "/events",
        "/containers/json",
        "/images/json",
        "/networks",
        "/volumes",
        "/system/df",
    ]
    .map(str::to_owned)
    .to_vec();
    for end in ["json", "logs", "top", "stats", "changes"] {
        paths.push(format!("/containers/{ID}/{end}"));
    }
    for name in [
        "alpine",
        "alpine:3.19",
        "docker.io/library/alpine:latest",
        "a@sha256:ab12",
    ] {
        paths.push(format!("/images/{name}/json"));
        paths.push(format!("/images/{name}/history"));
    }
    paths.push(format!("/networks/{ID}"));
    paths.push("/volumes/my_volume-1.data".to_owned());
    paths.push(format!("/exec/{ID}/json"));
    paths
}

#[test]
fn every_read_entry_is_allowed_for_get_and_head_and_nothing_else() {
    for path in reads() {
        for method in ["GET", "HEAD"] {
            let f = allowed(method, &path);
            assert_eq!(f.path_and_query, path);
            assert!(!f.upgrade_allowed, "{path}");
        }
        for method in ["POST", "PUT", "DELETE", "PATCH", "get", "OPTIONS"] {
            assert_eq!(denied(method, &path).status, 403, "{method} {path}");
        }
    }
}

#[test]
fn every_post_entry_is_allowed_and_only_start_and_attach_upgrade() {
    for (path, upgrade) in [
        (format!("/exec/{ID}/start"), true),
        (
            format!("/containers/{ID}/attach?stream=1&stdin=1&stdout=1"),
            true,
        ),
        (format!("/exec/{ID}/resize?h=40&w=120"), false),
        (format!("/containers/{ID}/resize?h=40&w=120"), false),
    ] {
        let f = allowed("POST", &path);
        assert_eq!(
            (f.path_and_query.as_str(), f.upgrade_allowed),
            (path.as_str(), upgrade)
        );
        assert_eq!(denied("GET", &path).status, 403, "{path}");
    }
    let exec = format!("/containers/{ID}/exec");
    let body = br#"{"AttachStdout":true,"Cmd":["ls"]}"#;
    let f = super::decide("POST", &exec, body, &super::READ_ONLY).unwrap();
    assert!(!f.upgrade_allowed);
    assert_eq!(denied("GET", &exec).status, 403);
}

#[test]
fn the_neighbours_of_the_allowlist_are_refused() {
    let get = [
        format!("/containers/{ID}/archive?path=/etc"),
        format!("/containers/{ID}/export"),
        format!("/containers/{ID}/attach/ws"),
        "/images/alpine/get".to_owned(),
        "/images/get?names=alpine".to_owned(),
        "/images/docker.io/library/alpine/get".to_owned(),
        "/images/search?term=x".to_owned(),
        "/distribution/alpine/json".to_owned(),
        "/plugins".to_owned(),
        "/plugins/x/json".to_owned(),
        "/swarm".to_owned(),
        "/nodes".to_owned(),
        "/services".to_owned(),
        "/tasks".to_owned(),
        "/secrets".to_owned(),
        "/configs".to_owned(),
        "/session".to_owned(),
        "/containers".to_owned(),
        "/containers/a/b/json".to_owned(),
        "/exec/x".to_owned(),
        "/networks/a/b".to_owned(),
        "/volumes/a/b".to_owned(),
        "/system".to_owned(),
        "/".to_owned(),
        "/v1.41".to_owned(),
        "/v1.41/v1.41/containers/json".to_owned(),
    ];
    for path in get {
        let d = denied("GET", &path);
        assert!(d.status == 403 || d.status == 400, "{path}: {d:?}");
    }
    let post = [
        "/build".to_owned(),
        "/containers/create".to_owned(),
        "/images/create?fromImage=alpine".to_owned(),
        "/images/load".to_owned(),
        "/images/alpine/push".to_owned(),
        "/images/alpine/tag".to_owned(),
        "/commit?container=x".to_owned(),
        "/containers/prune".to_owned(),
        "/networks/create".to_owned(),
        "/volumes/create".to_owned(),
        "/plugins/pull".to_owned(),
        "/swarm/init".to_owned(),
        "/secrets/create".to_owned(),
        "/auth".to_owned(),
        "/session".to_owned(),
    ];
    for path in post {
        assert_eq!(denied("POST", &path), denied("POST", "/build"), "{path}");
    }
    for end in [
        "start", "stop", "kill", "restart", "pause", "unpause", "wait", "update", "rename",
        "archive", "copy", "json", "logs",
    ] {
        let d = denied("POST", &format!("/containers/{ID}/{end}"));
        assert_eq!((d.status, d.reason), (403, NOT_ALLOWED), "{end}");
    }
    for method in ["DELETE", "PUT"] {
        assert_eq!(denied(method, &format!("/containers/{ID}")).status, 403);
        assert_eq!(denied(method, "/images/alpine").status, 403);
        assert_eq!(
            denied(method, &format!("/containers/{ID}/archive")).status,
            403
        );
    }
}

#[test]
fn the_last_segment_of_an_image_path_names_the_endpoint() {
    assert_eq!(denied("GET", "/images/x/get").status, 403);
    assert_eq!(denied("GET", "/images/x/json/get").status, 403);
    // An image named `x/get` is inspected, never exported.
    assert_eq!(
        allowed("GET", "/images/x/get/json").path_and_query,
        "/images/x/get/json"
    );
    let long = "a".repeat(256);
    assert_eq!(denied("GET", &format!("/images/{long}/json")).status, 403);
    assert!(
        super::decide(
            "GET",
            &format!("/images/{}/json", "a".repeat(255)),
            b"",
            &super::READ_ONLY
        )
        .is_ok()
    );
    assert_eq!(denied("GET", "/images/a$b/json").status, 403);
    assert_eq!(
        denied("GET", &format!("/containers/{}/json", "a".repeat(129))).status,
        403
    );
    assert_eq!(denied("GET", "/containers/-x/json").status, 403);
    assert_eq!(denied("GET", "/containers/a:b/json").status, 403);
}

#[test]
fn a_version_prefix_is_kept_and_the_query_forwarded_unchanged() {
    let f = allowed(
        "GET",
        "/v1.41/containers/json?all=1&filters=%7B%22a%22%3A1%7D",
    );
    assert_eq!(
        f.path_and_query,
        "/v1.41/containers/json?all=1&filters=%7B%22a%22%3A1%7D"
    );
    assert_eq!(
        allowed("HEAD", "/v1.47/_ping").path_and_query,
        "/v1.47/_ping"
    );
    // The query starts at the first raw `?`; what follows may hold more.
    let f = allowed("GET", "/containers/json?a=?b/../x");
    assert_eq!(f.path_and_query, "/containers/json?a=?b/../x");
    for bad in [
        "/v1/containers/json",
        "/v1.x/containers/json",
        "/vv1.41/containers/json",
        "/V1.41/info",
    ] {
        assert_eq!(denied("GET", bad).status, 403, "{bad}");
    }
}

#[test]
fn the_path_is_decoded_once_and_the_decoded_path_goes_upstream() {
    // Decoding once and matching the result is what the engine does too.
    assert_eq!(
        allowed("GET", "/%63ontainers/json").path_and_query,
        "/containers/json"
    );
    assert_eq!(
        allowed("GET", "/images/alpine%3A3/json").path_and_query,
        "/images/alpine:3/json"
    );
    let n = normalise("/v1.41/%69nfo?x=%2F").unwrap();
    assert_eq!((n.version.as_str(), n.path.as_str()), ("/v1.41", "/info"));
    assert_eq!(n.query.as_deref(), Some("x=%2F"));
}

#[test]
fn every_normalisation_trick_is_refused() {
    let cases = [
        (
            "/containers/x/../../images/x/get",
            "a dot segment is refused",
        ),
        ("/containers/./json", "a dot segment is refused"),
        (
            "/containers/%2e%2e/images/x/get",
            "a dot segment is refused",
        ),
        ("/containers//json", "an empty path segment is refused"),
        ("//containers/json", "an empty path segment is refused"),
        ("/containers/json/", "a trailing slash is refused"),
        ("/", "an empty path segment is refused"),
        (
            "/containers%2Fjson",
            "an encoded '/', '?', '#' or '%' is refused",
        ),
        (
            "/containers%2fjson",
            "an encoded '/', '?', '#' or '%' is refused",
        ),
        (
            "/containers/json%3F",
            "an encoded '/', '?', '#' or '%' is refused",
        ),
        (
            "/containers/json%3f.x",
            "an encoded '/', '?', '#' or '%' is refused",
        ),
        (
            "/containers/json%23",
            "an encoded '/', '?', '#' or '%' is refused",
        ),
        (
            "/images/x%252Fget/json",
            "an encoded '/', '?', '#' or '%' is refused",
        ),
        (
            "/containers/json%2",
            "a malformed percent-escape is refused",
        ),
        (
            "/containers/json%zz",
            "a malformed percent-escape is refused",
        ),
        (
            "/containers/json%00",
            "a control, space or non-ASCII byte is refused",
        ),
        (
            "/containers/json%20",
            "a control, space or non-ASCII byte is refused",
        ),
        (
            "/containers/json%C3%A9",
            "a control, space or non-ASCII byte is refused",
        ),
        (
            "/containers/jsoné",
            "a control, space or non-ASCII byte is refused",
        ),
        (
            "/containers/json\t",
            "a control, space or non-ASCII byte is refused",
        ),
        (
            "/containers/json?a b",
            "a control, space or non-ASCII byte is refused",
        ),
        (
            "/containers/json?a=é",
            "a control, space or non-ASCII byte is refused",
        ),
        ("/containers/json#x", "a fragment is refused"),
        ("/containers/json?a#x", "a fragment is refused"),
        (
            "http://x/containers/json",
            "the request target must be origin-form",
        ),
        (
            "docker/containers/json",
            "the request target must be origin-form",
        ),
        ("*", "the request target must be origin-form"),
        ("", "the request target must be origin-form"),
    ];
    for (target, reason) in cases {
        let d = denied("GET", target);
        assert_eq!((d.status, d.reason), (400, reason), "{target:?}");
    }
    let long = format!(
        "/containers/json?{}",
        "a".repeat(super::super::MAX_TARGET_BYTES)
    );
    assert_eq!(denied("GET", &long).status, 414);
}

#[test]
fn a_body_on_a_read_or_past_the_cap_is_refused() {
    let d = super::decide("GET", "/info", b"{}", &super::READ_ONLY).unwrap_err();
    assert_eq!(d.status, 400);
    let big = vec![b' '; super::super::MAX_BODY_BYTES + 1];
    let d = super::decide(
        "POST",
        &format!("/exec/{ID}/start"),
        &big,
        &super::READ_ONLY,
    );
    assert_eq!(d.unwrap_err().status, 413);
    // A refused target is refused for its target, whatever the body.
    assert_eq!(
        super::decide("POST", "/build", &big, &super::READ_ONLY)
            .unwrap_err()
            .status,
        403
    );
}
