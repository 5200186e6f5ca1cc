//! Text airlock shows or logs that may carry what it must not: credentials in a URL, or control
//! characters from a name or output the sandbox chose (a terminal acts on escape sequences).

/// `url` with its userinfo (`user:password@`) replaced by `***@`, for anything shown or logged.
pub fn without_userinfo(url: &str) -> String {
    match url
        .split_once("://")
        .and_then(|(scheme, rest)| Some((scheme, rest.rsplit_once('@')?.1)))
    {
        Some((scheme, authority)) => format!("{scheme}://***@{authority}"),
        None => url.to_owned(),
    }
}

/// `text` with every control character but a newline and a tab escaped (`\u{1b}`), so text the
/// sandbox influenced (a file name, a tool's output) prints as text on the host's terminal and
/// cannot drive it (colours, titles, OSC 52 clipboard writes, cursor moves over earlier lines).
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_and_control_characters_do_not_come_through() {
        assert_eq!(
            without_userinfo("http://u:p@proxy:3128"),
            "http://***@proxy:3128"
        );
        assert_eq!(without_userinfo("http://proxy:3128"), "http://proxy:3128");
        let shown = printable("v1.0\x1b]52;c;ZXZpbA==\x07\r\x1b[2Ktab\tline\n");
        assert!(!shown.contains('\x1b') && !shown.contains('\x07') && !shown.contains('\r'));
        assert_eq!(
            shown,
            "v1.0\\u{1b}]52;c;ZXZpbA==\\u{7}\\r\\u{1b}[2Ktab\tline\n"
        );
    }
}
