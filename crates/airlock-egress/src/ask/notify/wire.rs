//! The few D-Bus messages a desktop question needs, in the wire format of the D-Bus
//! specification ("Message Protocol"): method calls out, method returns, errors and signals in.
//!
//! Only what is used is written: the basic types `y u i s o g`, arrays of strings, `a{sv}` hints
//! holding a byte, and bodies of `s`, `u`, `us`, `uu` and `as` read back. An incoming message
//! whose header or body is outside that, or past [`MAX_MESSAGE`], is refused as a whole (the
//! connection is dropped), never half-read.

/// The longest message read: the bus and a notification server send a few hundred bytes.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// The message types of the specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    MethodCall = 1,
    MethodReturn = 2,
    Error = 3,
    Signal = 4,
}

/// A value of a body this module writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    Str(String),
    U32(u32),
    I32(i32),
    /// `as`
    Strings(Vec<String>),
    /// `a{sv}` whose values are bytes (`y`): the hints of a notification.
    ByteHints(Vec<(String, u8)>),
}

impl Arg {
    fn signature(&self) -> &'static str {
        match self {
            Arg::Str(_) => "s",
            Arg::U32(_) => "u",
            Arg::I32(_) => "i",
            Arg::Strings(_) => "as",
            Arg::ByteHints(_) => "a{sv}",
        }
    }
}

/// A method call to send.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub destination: &'a str,
    pub path: &'a str,
    pub interface: &'a str,
    pub member: &'a str,
    pub args: Vec<Arg>,
    /// NO_REPLY_EXPECTED: the bus sends no answer.
    pub no_reply: bool,
}

/// A body value read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Str(String),
    U32(u32),
    Strings(Vec<String>),
}

/// An incoming message, as far as a desktop question reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    pub kind: Option<u8>,
    pub serial: u32,
    pub reply_serial: Option<u32>,
    pub sender: Option<String>,
    pub path: Option<String>,
    pub interface: Option<String>,
    pub member: Option<String>,
    pub error_name: Option<String>,
    pub signature: String,
    pub body: Vec<Value>,
}

impl Message {
    pub fn is(&self, kind: Kind) -> bool {
        self.kind == Some(kind as u8)
    }
}

/// Bytes aligned relative to the start of the buffer (a header, or a body, which starts aligned
/// to 8 in the message, so both align the same).
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn pad(&mut self, to: usize) {
        while !self.0.len().is_multiple_of(to) {
            self.0.push(0);
        }
    }
    fn u32(&mut self, v: u32) {
        self.pad(4);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
        self.0.push(0);
    }
    fn sig(&mut self, s: &str) {
        self.0.push(s.len() as u8);
        self.0.extend_from_slice(s.as_bytes());
        self.0.push(0);
    }
    /// An array: its length, then `elements` (aligned to `align` first, which the length does
    /// not count).
    fn array(&mut self, align: usize, elements: impl FnOnce(&mut Writer)) {
        self.u32(0);
        let at = self.0.len() - 4;
        self.pad(align);
        let start = self.0.len();
        elements(self);
        let len = (self.0.len() - start) as u32;
        self.0[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
    fn arg(&mut self, arg: &Arg) {
        match arg {
            Arg::Str(s) => self.str(s),
            Arg::U32(v) => self.u32(*v),
            Arg::I32(v) => self.u32(*v as u32),
            Arg::Strings(list) => self.array(4, |w| list.iter().for_each(|s| w.str(s))),
            Arg::ByteHints(hints) => self.array(8, |w| {
                for (key, byte) in hints {
                    w.pad(8);
                    w.str(key);
                    w.sig("y");
                    w.0.push(*byte);
                }
            }),
        }
    }
}

/// The bytes of `call` as message `serial` (little-endian).
pub fn encode(call: &Call<'_>, serial: u32) -> Vec<u8> {
    let mut body = Writer::default();
    let mut signature = String::new();
    for arg in &call.args {
        body.arg(arg);
        signature.push_str(arg.signature());
    }
    let mut h = Writer::default();
    h.0.extend_from_slice(&[b'l', Kind::MethodCall as u8, u8::from(call.no_reply), 1]);
    h.u32(body.0.len() as u32);
    h.u32(serial);
    let field = |w: &mut Writer, code: u8, sig: &str, value: &str| {
        w.pad(8);
        w.0.push(code);
        w.sig(sig);
        match sig {
            "g" => w.sig(value),
            _ => w.str(value),
        }
    };
    h.array(8, |w| {
        field(w, 1, "o", call.path);
        field(w, 2, "s", call.interface);
        field(w, 3, "s", call.member);
        field(w, 6, "s", call.destination);
        if !signature.is_empty() {
            field(w, 8, "g", &signature);
        }
    });
    h.pad(8);
    h.0.extend_from_slice(&body.0);
    h.0
}

/// Reads values from `bytes`, aligned relative to its start, in the message's byte order.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    big: bool,
}

type Bad = &'static str;

impl<'a> Reader<'a> {
    fn align(&mut self, to: usize) -> Result<(), Bad> {
        let next = self.at.next_multiple_of(to);
        (next <= self.bytes.len())
            .then(|| self.at = next)
            .ok_or("truncated")
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        let end = self.at.checked_add(n).ok_or("truncated")?;
        let slice = self.bytes.get(self.at..end).ok_or("truncated")?;
        self.at = end;
        Ok(slice)
    }
    fn u8(&mut self) -> Result<u8, Bad> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, Bad> {
        self.align(4)?;
        let b: [u8; 4] = self.take(4)?.try_into().map_err(|_| "truncated")?;
        Ok(if self.big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }
    fn text(&mut self, len: usize) -> Result<String, Bad> {
        let s = std::str::from_utf8(self.take(len)?).map_err(|_| "a string that is not UTF-8")?;
        if self.u8()? != 0 || s.contains('\0') {
            return Err("a string not ended by NUL");
        }
        Ok(s.to_owned())
    }
    fn str(&mut self) -> Result<String, Bad> {
        let len = self.u32()? as usize;
        self.text(len)
    }
    fn sig(&mut self) -> Result<String, Bad> {
        let len = self.u8()? as usize;
        self.text(len)
    }
    fn value(&mut self, sig: &str) -> Result<Value, Bad> {
        match sig {
            "s" | "o" => Ok(Value::Str(self.str()?)),
            "g" => Ok(Value::Str(self.sig()?)),
            "u" => Ok(Value::U32(self.u32()?)),
            "as" => {
                let len = self.u32()? as usize;
                let end = self.at.checked_add(len).ok_or("truncated")?;
                let mut list = Vec::new();
                while self.at < end {
                    list.push(self.str()?);
                }
                (self.at == end)
                    .then_some(Value::Strings(list))
                    .ok_or("an array past its length")
            }
            _ => Err("a type this client does not read"),
        }
    }
}

/// How many bytes the message starting `bytes` takes, once its fixed 16-byte start is there.
pub fn message_len(bytes: &[u8]) -> Result<Option<usize>, Bad> {
    if bytes.len() < 16 {
        return Ok(None);
    }
    let big = match bytes[0] {
        b'l' => false,
        b'B' => true,
        _ => return Err("not a D-Bus message"),
    };
    let word = |at: usize| {
        let b: [u8; 4] = bytes[at..at + 4].try_into().expect("four bytes");
        if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let (body, fields) = (word(4) as usize, word(12) as usize);
    let total = (16 + fields).next_multiple_of(8) + body;
    if body > MAX_MESSAGE || fields > MAX_MESSAGE || total > MAX_MESSAGE {
        return Err("a message longer than 64 KiB");
    }
    Ok(Some(total))
}

/// Decodes one whole message (`bytes` is exactly [`message_len`] long).
pub fn decode(bytes: &[u8]) -> Result<Message, Bad> {
    let mut r = Reader {
        bytes,
        at: 0,
        big: bytes.first() == Some(&b'B'),
    };
    let _order = r.u8()?;
    let mut m = Message {
        kind: Some(r.u8()?),
        ..Message::default()
    };
    let _flags = r.u8()?;
    if r.u8()? != 1 {
        return Err("not protocol version 1");
    }
    let body_len = r.u32()? as usize;
    m.serial = r.u32()?;
    let fields_len = r.u32()? as usize;
    let fields_end = r.at + fields_len;
    while r.at < fields_end {
        r.align(8)?;
        let code = r.u8()?;
        let sig = r.sig()?;
        let value = r.value(&sig)?;
        let text = |v: Value| match v {
            Value::Str(s) => Ok(s),
            _ => Err("a header field of the wrong type"),
        };
        match code {
            1 => m.path = Some(text(value)?),
            2 => m.interface = Some(text(value)?),
            3 => m.member = Some(text(value)?),
            4 => m.error_name = Some(text(value)?),
            5 => match value {
                Value::U32(v) => m.reply_serial = Some(v),
                _ => return Err("a reply serial that is not a u32"),
            },
            7 => m.sender = Some(text(value)?),
            8 => m.signature = text(value)?,
            _ => {}
        }
    }
    if r.at != fields_end {
        return Err("header fields past their length");
    }
    r.align(8)?;
    let body = r.take(body_len)?;
    if r.at != bytes.len() {
        return Err("bytes after the body");
    }
    let mut b = Reader {
        bytes: body,
        at: 0,
        big: r.big,
    };
    let mut sig = m.signature.as_str();
    while !sig.is_empty() {
        let one = if sig.starts_with("as") {
            "as"
        } else {
            &sig[..1]
        };
        m.body.push(b.value(one)?);
        sig = &sig[one.len()..];
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_encodes_as_the_specification_lays_it_out() {
        let call = Call {
            destination: "org.freedesktop.DBus",
            path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus",
            member: "Hello",
            args: vec![],
            no_reply: false,
        };
        let bytes = encode(&call, 1);
        assert_eq!(&bytes[..4], b"l\x01\x00\x01");
        assert_eq!(&bytes[4..8], &0u32.to_le_bytes(), "no body");
        assert_eq!(&bytes[8..12], &1u32.to_le_bytes());
        assert_eq!(bytes.len() % 8, 0);
        assert_eq!(message_len(&bytes), Ok(Some(bytes.len())));
        // Decoded back (as a method call it has no sender): the same fields.
        let m = decode(&bytes).unwrap();
        assert!(m.is(Kind::MethodCall));
        assert_eq!(m.member.as_deref(), Some("Hello"));
        assert_eq!(m.path.as_deref(), Some("/org/freedesktop/DBus"));
    }

    #[test]
    fn bodies_round_trip_with_their_alignment() {
        let call = Call {
            destination: "d.e",
            path: "/p",
            interface: "i.f",
            member: "M",
            args: vec![
                Arg::Str("a".into()),
                Arg::U32(7),
                Arg::Strings(vec!["x".into(), "yz".into()]),
            ],
            no_reply: true,
        };
        let bytes = encode(&call, 9);
        let m = decode(&bytes).unwrap();
        assert_eq!(m.signature, "suas");
        assert_eq!(
            m.body,
            vec![
                Value::Str("a".into()),
                Value::U32(7),
                Value::Strings(vec!["x".into(), "yz".into()])
            ]
        );
    }

    #[test]
    fn bad_messages_are_refused_whole() {
        assert_eq!(message_len(b"l\x01\x00\x01"), Ok(None));
        assert!(message_len(b"X\x01\x00\x01\0\0\0\0\x01\0\0\0\0\0\0\0").is_err());
        let mut huge = b"l\x04\x00\x01".to_vec();
        huge.extend_from_slice(&(1u32 << 20).to_le_bytes());
        huge.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        assert!(message_len(&huge).is_err());
        let good = encode(
            &Call {
                destination: "d.e",
                path: "/p",
                interface: "i.f",
                member: "M",
                args: vec![Arg::Str("abc".into())],
                no_reply: false,
            },
            3,
        );
        for cut in 1..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
    }
}
