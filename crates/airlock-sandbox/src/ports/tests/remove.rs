//! `remove HOST`: the listener closes at once, a connection it relays already goes on, and an
//! unknown or outbound port is refused naming what the session does forward.

use super::*;

#[test]
fn remove_closes_the_listener_and_leaves_open_connections_alone() {
    let inside = free_port();
    let Some(sandbox) = FakeSandbox::start(&["echo", &inside.to_string()]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let me = session(NetworkMode::Proxy, Some(&run));
    let (published, out_host, out_inside) = (free_port(), free_port(), free_port());
    let ports = PortsSpec {
        forwards: vec![
            inbound(published, inside),
            PortForward {
                host: out_host,
                sandbox: out_inside,
                direction: PortDirection::Out,
                origin: "[[network.ports]] #1".into(),
            },
        ],
        control_dir: Some(run.clone()),
    };
    let service = PortService::start_for(&me, &ports, sandbox.pid())
        .map(serving)
        .expect("start");
    let socket = run.join(socket_name(me.pid));
    let host = free_port();
    ask(
        &socket,
        &Request::Forward {
            host,
            sandbox: inside,
        },
        ASK,
    )
    .expect("forward");
    // A connection open before the removal, mid-exchange.
    let mut open = TcpStream::connect((Ipv4Addr::LOCALHOST, host)).unwrap();
    open.set_read_timeout(Some(ASK)).unwrap();
    open.write_all(b"one").unwrap();
    let mut got = [0u8; 3];
    open.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"one");

    let ok = ask(&socket, &Request::Remove { host }, ASK).expect("remove");
    assert!(
        ok.contains(&format!(
            "127.0.0.1:{host} no longer reaches 127.0.0.1:{inside}"
        )),
        "{ok}"
    );
    // Closed on return: nothing listens, and the port is the host's again.
    assert!(!listening(host), "the listener is closed");
    assert!(TcpListener::bind((Ipv4Addr::LOCALHOST, host)).is_ok());
    // The connection relayed already still carries bytes both ways.
    open.write_all(b"two").unwrap();
    open.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"two");
    drop(open);

    let infos: Vec<ForwardInfo> =
        serde_json::from_str(&ask(&socket, &Request::Ports, ASK).unwrap()).unwrap();
    assert_eq!(infos.len(), 2, "{infos:?}");
    assert!(infos.iter().all(|i| i.host != host));

    // Again: this session no longer forwards it.
    let again = ask(&socket, &Request::Remove { host }, ASK);
    let expected = format!(
        "this session forwards no host port {host}; its inbound forwards: {published}→{inside}"
    );
    assert!(
        matches!(&again, Err(AskError::Refused(r)) if *r == expected),
        "{again:?}"
    );
    // An outbound forward's host port is not an inbound listener of the host.
    let outbound = ask(&socket, &Request::Remove { host: out_host }, ASK);
    assert!(
        matches!(&outbound, Err(AskError::Refused(r)) if r.contains("outbound forward's target")),
        "{outbound:?}"
    );
    // A launch forward (--publish) can be removed too; then none is left inbound.
    ask(&socket, &Request::Remove { host: published }, ASK).expect("remove the published one");
    assert!(!listening(published));
    let none = ask(&socket, &Request::Remove { host: published }, ASK);
    assert!(
        matches!(&none, Err(AskError::Refused(r)) if r.ends_with("it has no inbound forwards")),
        "{none:?}"
    );
    drop(service);
}
