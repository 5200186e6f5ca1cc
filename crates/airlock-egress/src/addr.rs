//! Which resolved addresses are special: loopback, private, link-local, cloud metadata, this host's
//! own. An allowed name that resolves to one of these is refused unless a rule names the address, so
//! a name cannot be pointed (by DNS or by the agent's own records) at the host's services.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// A deny rule names the address.
    Denied,
    Unspecified,
    Loopback,
    LinkLocal,
    /// Instance metadata services (169.254.169.254, fd00:ec2::254, 100.100.100.200, …).
    CloudMetadata,
    /// RFC 1918, CGNAT (100.64.0.0/10), IPv6 unique-local and site-local.
    Private,
    Multicast,
    Broadcast,
    /// 240.0.0.0/4 and other addresses that are never a public host.
    Reserved,
    /// One of this host's own interface addresses.
    ThisHost,
}

impl AddressClass {
    pub fn as_str(self) -> &'static str {
        match self {
            AddressClass::Denied => "named by a deny rule",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Loopback => "loopback",
            AddressClass::LinkLocal => "link-local",
            AddressClass::CloudMetadata => "a cloud metadata service",
            AddressClass::Private => "private",
            AddressClass::Multicast => "multicast",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Reserved => "reserved",
            AddressClass::ThisHost => "one of this host's own addresses",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const METADATA_V4: &[Ipv4Addr] = &[
    Ipv4Addr::new(169, 254, 169, 254), // AWS, GCP, Azure, OCI, DigitalOcean, …
    Ipv4Addr::new(169, 254, 170, 2),   // AWS ECS task metadata
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud
    Ipv4Addr::new(168, 63, 129, 16),   // Azure wire server (a public address)
];
const METADATA_V6: &[Ipv6Addr] = &[Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)];

/// The class of a special address, `None` for an ordinary public one. IPv4-mapped, IPv4-compatible
/// and NAT64 (64:ff9b::/96) IPv6 addresses are judged by the IPv4 address they carry.
pub fn classify(ip: IpAddr, local: &[IpAddr]) -> Option<AddressClass> {
    let by_range = match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    };
    by_range.or_else(|| {
        local
            .iter()
            .any(|l| same_address(*l, ip))
            .then_some(AddressClass::ThisHost)
    })
}

/// Equal, or the same IPv4 address in IPv6 dress.
pub fn same_address(a: IpAddr, b: IpAddr) -> bool {
    let plain = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    plain(a) == plain(b)
}

fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail),
        // IPv4-compatible (deprecated), but not :: and ::1 themselves.
        [0, 0, 0, 0, 0, 0, hi, _] if hi != 0 => Some(tail),
        _ => None,
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, _, _] = ip.octets();
    let class = if METADATA_V4.contains(&ip) {
        AddressClass::CloudMetadata
    } else if a == 0 {
        AddressClass::Unspecified
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_link_local() {
        AddressClass::LinkLocal
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        AddressClass::Private
    } else if ip.is_broadcast() {
        AddressClass::Broadcast
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if a >= 240
        || (a == 192 && b == 0 && ip.octets()[2] == 0)
        || (a == 198 && (b & 0xfe) == 18)
    {
        // 240/4, 192.0.0.0/24 (IETF protocol assignments), 198.18.0.0/15 (benchmarking).
        AddressClass::Reserved
    } else {
        return None;
    };
    Some(class)
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    let first = ip.segments()[0];
    let class = if METADATA_V6.contains(&ip) {
        AddressClass::CloudMetadata
    } else if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if first & 0xffc0 == 0xfe80 {
        AddressClass::LinkLocal
    } else if first & 0xfe00 == 0xfc00 || first & 0xffc0 == 0xfec0 {
        AddressClass::Private
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else {
        return None;
    };
    Some(class)
}

/// This host's interface addresses (every interface, up or not).
pub fn local_addresses() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    addrs
        .filter_map(|ifa| ifa.address)
        .filter_map(|a| {
            if let Some(v4) = a.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> Option<AddressClass> {
        classify(s.parse().unwrap(), &[])
    }

    #[test]
    fn special_addresses_are_classified() {
        use AddressClass::*;
        let cases = [
            ("127.0.0.1", Some(Loopback)),
            ("127.8.9.10", Some(Loopback)),
            ("::1", Some(Loopback)),
            ("::ffff:127.0.0.1", Some(Loopback)),
            ("64:ff9b::7f00:1", Some(Loopback)),
            ("0.0.0.0", Some(Unspecified)),
            ("::", Some(Unspecified)),
            ("10.1.2.3", Some(Private)),
            ("172.16.0.1", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("192.168.1.1", Some(Private)),
            ("100.64.0.1", Some(Private)),
            ("fd12::1", Some(Private)),
            ("169.254.1.1", Some(LinkLocal)),
            ("fe80::1", Some(LinkLocal)),
            ("169.254.169.254", Some(CloudMetadata)),
            ("::ffff:169.254.169.254", Some(CloudMetadata)),
            ("fd00:ec2::254", Some(CloudMetadata)),
            ("100.100.100.200", Some(CloudMetadata)),
            ("224.0.0.1", Some(Multicast)),
            ("ff02::1", Some(Multicast)),
            ("255.255.255.255", Some(Broadcast)),
            ("240.0.0.1", Some(Reserved)),
            ("8.8.8.8", None),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("2606:4700::1111", None),
        ];
        for (ip, want) in cases {
            assert_eq!(class(ip), want, "{ip}");
        }
    }

    #[test]
    fn this_hosts_addresses_are_special() {
        let local: Vec<IpAddr> = vec!["203.0.113.7".parse().unwrap()];
        assert_eq!(
            classify("203.0.113.7".parse().unwrap(), &local),
            Some(AddressClass::ThisHost)
        );
        assert_eq!(
            classify("::ffff:203.0.113.7".parse().unwrap(), &local),
            Some(AddressClass::ThisHost)
        );
        assert!(
            local_addresses().iter().any(|ip| ip.is_loopback()),
            "lo has 127.0.0.1"
        );
    }
}
