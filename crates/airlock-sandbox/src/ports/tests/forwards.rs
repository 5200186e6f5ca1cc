//! The launch's forwards: inbound, outbound, a host port in use.

use super::*;

#[test]
fn inbound_forwards_reach_the_sandbox_and_end_with_the_service() {
    let inside = free_port();
    let Some(sandbox) = FakeSandbox::start(&["echo", &inside.to_string()]) else {
        return;
    };
    let host = free_port();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("state/run");
    let ports = PortsSpec {
        forwards: vec![inbound(host, inside)],
        control_dir: Some(run.clone()),
    };
    let me = session(NetworkMode::Proxy, Some(&run));
    let service = PortService::start_for(&me, &ports, sandbox.pid())
        .map(serving)
        .expect("start");
    assert!(service.warnings().is_empty(), "{:?}", service.warnings());
    assert_eq!(echo_through(host), "ping", "through the forward");
    // Control: the server lives in the sandbox's network namespace alone.
    assert_eq!(echo_through(inside), "", "not on the host's loopback");
    let socket = run.join(socket_name(me.pid));
    let listed = ask(&socket, &Request::Ports, ASK).expect("ports");
    let infos: Vec<ForwardInfo> = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        infos,
        [ForwardInfo {
            host,
            sandbox: inside,
            direction: PortDirection::In,
            kind: ForwardKind::Publish,
            expires_in_secs: None,
        }]
    );
    assert_eq!(
        sessions::list(&run),
        std::slice::from_ref(&me),
        "the record is listed"
    );
    let net = std::fs::read_link(format!("/proc/{}/ns/net", sandbox.pid())).unwrap();
    assert_eq!(helpers(&net).len(), 1, "one helper makes the sockets");
    // A connection held open across the end is shut too.
    let mut held = TcpStream::connect((Ipv4Addr::LOCALHOST, host)).unwrap();
    held.write_all(b"x").unwrap();
    drop(service);
    assert!(!listening(host), "the host listener is closed");
    TcpListener::bind((Ipv4Addr::LOCALHOST, host)).expect("the port is free again");
    held.set_read_timeout(Some(ASK)).unwrap();
    let mut buf = [0u8; 8];
    let n = held.read(&mut buf).unwrap_or(0);
    assert!(
        n <= 1 && held.read(&mut buf).unwrap_or(0) == 0,
        "the held connection ended"
    );
    assert!(!socket.exists() && !run.join(format!("{}.json", me.pid)).exists());
    assert!(
        helpers(&net).is_empty(),
        "no helper left behind: {:?}",
        helpers(&net)
    );
}

#[test]
fn outbound_forwards_reach_the_named_host_service_only() {
    let Some(mut sandbox) = FakeSandbox::start(&["client"]) else {
        return;
    };
    let service_port = free_port();
    let host_service = TcpListener::bind((Ipv4Addr::LOCALHOST, service_port)).unwrap();
    std::thread::spawn(move || {
        for mut c in host_service.incoming().flatten() {
            let _ = c.write_all(b"from the host\n");
        }
    });
    let ports = PortsSpec {
        forwards: vec![PortForward {
            host: service_port,
            sandbox: 5432,
            direction: PortDirection::Out,
            origin: "test".into(),
        }],
        control_dir: None,
    };
    let service = PortService::start_for(&session(NetworkMode::None, None), &ports, sandbox.pid())
        .map(serving)
        .expect("start");
    assert_eq!(sandbox.connect(5432), "got from the host");
    // Control: the host's port itself is not reachable from the sandbox's namespace.
    assert_eq!(
        sandbox.connect(service_port),
        "error ConnectionRefusedError"
    );
    drop(service);
    assert_eq!(
        sandbox.connect(5432),
        "error ConnectionRefusedError",
        "the door closes with the session"
    );
}

#[test]
fn a_host_port_in_use_fails_the_start_and_is_never_shared() {
    let Some(sandbox) = FakeSandbox::start(&["echo", "8000"]) else {
        return;
    };
    for bind in [Ipv4Addr::LOCALHOST, Ipv4Addr::UNSPECIFIED] {
        let holder = TcpListener::bind((bind, 0)).unwrap();
        let port = holder.local_addr().unwrap().port();
        let ports = PortsSpec {
            forwards: vec![inbound(port, 8000)],
            control_dir: None,
        };
        let err = PortService::start_for(&session(NetworkMode::Proxy, None), &ports, sandbox.pid())
            .err()
            .expect("refused");
        assert!(
            err.starts_with(&format!(
                "--publish {port}:8000: the host's 127.0.0.1:{port} is in use"
            )),
            "{err}"
        );
        // The holder still gets its connections.
        let _c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        holder.set_nonblocking(true).unwrap();
        wait_for("the holder's connection", || holder.accept().is_ok());
    }
}
