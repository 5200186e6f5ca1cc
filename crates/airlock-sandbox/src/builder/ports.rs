//! The forwards of one launch: `[[network.ports]]` and `--publish`, checked against each other and
//! the network mode. Pure; the supervisor carries them out (`crate::ports`).

use airlock_config::NetworkMode;
use airlock_config::ports::{Mapping, PortDirection, clash};

use crate::spec::{PortForward, PortsSpec};

/// Why the forwards of a launch cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PortsError {
    #[error(
        "--publish {host}:{sandbox} is not needed with --network host: the sandbox shares the \
         host's network, so a server on 127.0.0.1:{sandbox} inside already is the host's \
         127.0.0.1:{sandbox}; drop --publish, or use --network proxy"
    )]
    PublishWithHostNetwork { host: u16, sandbox: u16 },
    #[error("{forward} clashes with {other}: {why}; remove one of them or choose another port")]
    Clash {
        forward: String,
        other: String,
        why: String,
    },
    #[error(
        "{forward}: 127.0.0.1:{port} inside the sandbox is the egress proxy's; choose another \
         sandbox port"
    )]
    EgressPort { forward: String, port: u16 },
}

/// The forwards of a launch and the warnings to print about them.
pub(super) fn plan(
    rules: &[airlock_config::ports::PortRule],
    publish: &[(u16, u16)],
    network: NetworkMode,
    control_dir: Option<std::path::PathBuf>,
) -> Result<(PortsSpec, Vec<String>), PortsError> {
    let mut forwards: Vec<PortForward> = Vec::new();
    let mut warnings = Vec::new();
    let configured = rules.iter().map(|r| PortForward {
        host: r.host,
        sandbox: r.sandbox,
        direction: r.direction,
        origin: r.label(),
    });
    let published = publish.iter().map(|&(host, sandbox)| PortForward {
        host,
        sandbox,
        direction: PortDirection::In,
        origin: format!("--publish {host}:{sandbox}"),
    });
    for forward in configured.chain(published) {
        let mapping = mapping(&forward);
        // The same forward named twice (a config entry and --publish) is made once.
        if forwards.iter().any(|f| self::mapping(f) == mapping) {
            continue;
        }
        if let Some((other, why)) = forwards
            .iter()
            .find_map(|f| clash(self::mapping(f), mapping).map(|why| (f, why)))
        {
            return Err(PortsError::Clash {
                forward: forward.origin,
                other: other.origin.clone(),
                why,
            });
        }
        if network == NetworkMode::Proxy && forward.sandbox == crate::native::EGRESS_PORT {
            return Err(PortsError::EgressPort {
                forward: forward.origin,
                port: forward.sandbox,
            });
        }
        forwards.push(forward);
    }
    if network == NetworkMode::Host {
        if let Some(f) = forwards.iter().find(|f| f.origin.starts_with("--publish")) {
            return Err(PortsError::PublishWithHostNetwork {
                host: f.host,
                sandbox: f.sandbox,
            });
        }
        for f in forwards.drain(..) {
            warnings.push(format!(
                "{} is not made with --network host: the sandbox shares the host's network, so \
                 it reaches the host's 127.0.0.1 and its servers are on it already",
                f.origin
            ));
        }
    }
    for f in forwards
        .iter()
        .filter(|f| f.direction == PortDirection::Out)
    {
        warnings.push(format!(
            "{} lets the sandbox reach the host's 127.0.0.1:{} (at 127.0.0.1:{} inside): whatever \
             listens there on the host is open to everything the sandbox runs",
            f.origin, f.host, f.sandbox
        ));
    }
    Ok((
        PortsSpec {
            forwards,
            control_dir,
        },
        warnings,
    ))
}

fn mapping(f: &PortForward) -> Mapping {
    Mapping {
        host: f.host,
        sandbox: f.sandbox,
        direction: f.direction,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_config::ports::PortRule;

    fn rule(host: u16, sandbox: u16, direction: PortDirection) -> PortRule {
        PortRule {
            host,
            sandbox,
            direction,
            origin: "/g.toml".into(),
            entry: 1,
        }
    }

    #[test]
    fn config_then_publish_with_one_forward_per_mapping() {
        let rules = [rule(5432, 5432, PortDirection::Out)];
        let (spec, warnings) = plan(
            &rules,
            &[(3000, 3000), (8080, 3000), (3000, 3000)],
            NetworkMode::Proxy,
            None,
        )
        .unwrap();
        let shown: Vec<_> = spec
            .forwards
            .iter()
            .map(|f| (f.host, f.sandbox, f.direction, f.origin.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    5432,
                    5432,
                    PortDirection::Out,
                    "/g.toml: [[network.ports]] #1 (host = 5432, sandbox = 5432, direction = \"out\")"
                ),
                (3000, 3000, PortDirection::In, "--publish 3000:3000"),
                (8080, 3000, PortDirection::In, "--publish 8080:3000"),
            ]
        );
        assert_eq!(
            warnings.len(),
            1,
            "the outbound door is named: {warnings:?}"
        );
        assert!(warnings[0].contains("reach the host's 127.0.0.1:5432"));
    }

    #[test]
    fn clashes_and_the_egress_port_are_refused_naming_both_sides() {
        let rules = [rule(3000, 3000, PortDirection::In)];
        let e = plan(&rules, &[(3000, 4000)], NetworkMode::Proxy, None).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("--publish 3000:4000 clashes with /g.toml"),
            "{msg}"
        );
        assert!(msg.contains("127.0.0.1:3000"), "{msg}");
        let e = plan(&[], &[(9000, 3128)], NetworkMode::Proxy, None).unwrap_err();
        assert!(e.to_string().contains("egress proxy's"), "{e}");
        assert!(plan(&[], &[(9000, 3128)], NetworkMode::None, None).is_ok());
    }

    #[test]
    fn host_network_refuses_publish_and_skips_configured_forwards_with_a_warning() {
        let e = plan(&[], &[(3000, 3000)], NetworkMode::Host, None).unwrap_err();
        assert!(
            e.to_string().contains("not needed with --network host"),
            "{e}"
        );
        let rules = [rule(3000, 3000, PortDirection::In)];
        let (spec, warnings) = plan(&rules, &[], NetworkMode::Host, None).unwrap();
        assert!(spec.forwards.is_empty());
        assert!(
            warnings[0].contains("is not made with --network host"),
            "{warnings:?}"
        );
    }
}
