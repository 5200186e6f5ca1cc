//! The one piece of shell syntax a launcher's command line may use, read without a shell.
//!
//! Launchers build a `sh -c` payload or a one-line script out of single-quoted words
//! (`'/usr/bin/revdiff' '--output=/tmp/x'`), joined by `&&` and `;`. That much is read here;
//! everything else a shell would act on (`$`, backquotes, double quotes, globs, `~`, pipes,
//! redirections, `&`, comments, control characters) is refused, so the words found are exactly
//! the words a shell would have run.

/// One token of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Token {
    Word(String),
    /// `&&`
    And,
    /// `;`
    Then,
}

/// Characters a word may hold outside quotes: none of them is special to `sh`.
fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./:=%+,@^-".contains(c)
}

/// Splits `line` into words and operators, or says why it is not the accepted syntax.
pub(super) fn tokenize(line: &str) -> Result<Vec<Token>, &'static str> {
    if line.chars().any(char::is_control) {
        return Err("command line has a control character");
    }
    let mut tokens = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' => {
                if let Some(w) = word.take() {
                    tokens.push(Token::Word(w));
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(inner) => w.push(inner),
                        None => return Err("unterminated quote in command line"),
                    }
                }
            }
            // `'\''`, the usual way to put a quote inside a single-quoted word.
            '\\' if chars.peek() == Some(&'\'') => {
                chars.next();
                word.get_or_insert_with(String::new).push('\'');
            }
            ';' | '&' => {
                if let Some(w) = word.take() {
                    tokens.push(Token::Word(w));
                }
                if c == ';' {
                    tokens.push(Token::Then);
                } else if chars.next() == Some('&') {
                    tokens.push(Token::And);
                } else {
                    return Err("background jobs are refused in command lines");
                }
            }
            c if plain(c) => word.get_or_insert_with(String::new).push(c),
            _ => return Err("shell syntax in command line is refused"),
        }
    }
    if let Some(w) = word {
        tokens.push(Token::Word(w));
    }
    Ok(tokens)
}

/// One simple command and the operator before it (none for the first).
pub(super) type Simple = (Option<Token>, Vec<String>);

/// A command line as simple commands.
pub(super) fn commands(line: &str) -> Result<Vec<Simple>, &'static str> {
    let mut out: Vec<Simple> = vec![(None, Vec::new())];
    for token in tokenize(line)? {
        match token {
            Token::Word(w) => out.last_mut().expect("never empty").1.push(w),
            op => {
                if out.last().is_some_and(|(_, words)| words.is_empty()) {
                    return Err("empty command in command line");
                }
                out.push((Some(op), Vec::new()));
            }
        }
    }
    // A trailing `;` ends the last command; it does not start another.
    if let Some((Some(Token::Then), words)) = out.last()
        && words.is_empty()
    {
        out.pop();
    }
    if out.iter().any(|(_, words)| words.is_empty()) {
        return Err("empty command in command line");
    }
    Ok(out)
}

/// `word` as a single-quoted shell word: taken literally by `sh`.
pub(super) fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}
