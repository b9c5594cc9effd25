//! Gatekeeper's `location` path language (`spec.containers[name: *].image`): scanner, parser and
//! printer, token for token as Gatekeeper's `pkg/mutation/path/{token,parser}`.
//!
//! Grammar: `path := ε | segment ("." segment)*`, `segment := IDENT ["[" IDENT ":" (IDENT | INT | "*") "]"]`.
//! An IDENT is `[A-Za-z0-9_-]+` not starting with a digit, or a `"..."`/`'...'` string in which a
//! backslash takes the next character literally. An INT is `[0-9]+`, kept as an `i64`.

use std::fmt;

pub use crate::error::LocationError;

/// The value a keyed-list selector looks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyValue {
    /// `[name: foo]`, `[name: "*"]`: a string, compared only with strings.
    Str(String),
    /// `[containerPort: 80]`: an integer, compared only with integers.
    Int(i64),
    /// `[name: *]`: every element.
    Glob,
}

impl KeyValue {
    /// Whether an element's key field equals this value, with Gatekeeper's strict typing: a string
    /// never equals a number, and `80` never equals `80.0`.
    pub fn matches(&self, field: &serde_json::Value) -> bool {
        match (self, field) {
            (KeyValue::Str(s), serde_json::Value::String(f)) => s == f,
            (KeyValue::Int(i), serde_json::Value::Number(n)) => n.as_i64() == Some(*i),
            _ => false,
        }
    }

    /// The JSON value a new element gets for its key field.
    pub fn to_json(&self) -> Option<serde_json::Value> {
        match self {
            KeyValue::Str(s) => Some(serde_json::Value::String(s.clone())),
            KeyValue::Int(i) => Some(serde_json::Value::from(*i)),
            KeyValue::Glob => None,
        }
    }
}

/// One step of a location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A field of an object.
    Object(String),
    /// The elements of a list whose `key` field equals `value`.
    List {
        /// The key field (`name` in `[name: foo]`).
        key: String,
        /// What it must equal.
        value: KeyValue,
    },
}

impl Node {
    /// Whether this is a `[key: *]` selector.
    pub fn is_glob(&self) -> bool {
        matches!(
            self,
            Node::List {
                value: KeyValue::Glob,
                ..
            }
        )
    }
}

/// A parsed location.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    nodes: Vec<Node>,
}

impl Location {
    /// Parses a location; the error points at the column (from 1) of the offending character.
    pub fn parse(input: &str) -> Result<Self, LocationError> {
        let mut location = Parser::new(input)?.path()?;
        // Pushed node by node; kept as long as the mutator is loaded.
        location.nodes.shrink_to_fit();
        Ok(location)
    }

    /// The steps.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Whether `prefix` is a node-wise prefix of this location (`a[name: "b"]` of `a[name: b].c`).
    pub fn starts_with(&self, prefix: &Location) -> bool {
        self.nodes.starts_with(&prefix.nodes)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Int(String),
    Dot,
    Open,
    Close,
    Colon,
    Glob,
    End,
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Ident(s) => format!("name {}", quote(s)),
            Token::Int(s) => format!("integer {s}"),
            Token::Dot => "`.`".into(),
            Token::Open => "`[`".into(),
            Token::Close => "`]`".into(),
            Token::Colon => "`:`".into(),
            Token::Glob => "`*`".into(),
            Token::End => "end of location".into(),
        }
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Splits the input into tokens, each with the column it starts at.
fn scan(input: &str) -> Result<Vec<(usize, Token)>, LocationError> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (column, c) = (i + 1, chars[i]);
        let single = match c {
            ' ' | '\t' | '\r' | '\n' => {
                i += 1;
                continue;
            }
            '.' => Some(Token::Dot),
            '[' => Some(Token::Open),
            ']' => Some(Token::Close),
            ':' => Some(Token::Colon),
            '*' => Some(Token::Glob),
            _ => None,
        };
        if let Some(token) = single {
            tokens.push((column, token));
            i += 1;
        } else if c == '"' || c == '\'' {
            let (text, next) = scan_quoted(&chars, i)?;
            tokens.push((column, Token::Ident(text)));
            i = next;
        } else if c.is_ascii_digit() {
            let end = (i..chars.len())
                .find(|&j| !chars[j].is_ascii_digit())
                .unwrap_or(chars.len());
            tokens.push((column, Token::Int(chars[i..end].iter().collect())));
            i = end;
        } else if is_ident_char(c) {
            let end = (i..chars.len())
                .find(|&j| !is_ident_char(chars[j]))
                .unwrap_or(chars.len());
            tokens.push((column, Token::Ident(chars[i..end].iter().collect())));
            i = end;
        } else {
            return Err(LocationError {
                column,
                expected: "a name, `.`, `[`, `]`, `:` or `*` (quote other characters)".into(),
                found: format!("invalid character {c:?}"),
            });
        }
    }
    tokens.push((chars.len() + 1, Token::End));
    Ok(tokens)
}

/// A quoted string starting at `start`; returns its text and the index after the closing quote.
fn scan_quoted(chars: &[char], start: usize) -> Result<(String, usize), LocationError> {
    let quote_char = chars[start];
    let mut text = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                text.push(chars[i + 1]);
                i += 2;
            }
            c if c == quote_char => return Ok((text, i + 1)),
            c => {
                text.push(c);
                i += 1;
            }
        }
    }
    Err(LocationError {
        column: start + 1,
        expected: format!("a closing {quote_char}"),
        found: "an unterminated string".into(),
    })
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    next: usize,
}

impl Parser {
    fn new(input: &str) -> Result<Self, LocationError> {
        Ok(Self {
            tokens: scan(input)?,
            next: 0,
        })
    }

    fn take(&mut self) -> (usize, Token) {
        let token = self.tokens[self.next].clone();
        if self.next + 1 < self.tokens.len() {
            self.next += 1;
        }
        token
    }

    fn error(column: usize, expected: &str, found: &Token) -> LocationError {
        LocationError {
            column,
            expected: expected.into(),
            found: found.describe(),
        }
    }

    fn path(mut self) -> Result<Location, LocationError> {
        let mut nodes = Vec::new();
        if self.tokens[0].1 == Token::End {
            return Ok(Location { nodes });
        }
        loop {
            match self.take() {
                (_, Token::Ident(name)) => nodes.push(Node::Object(name)),
                (column, token) => return Err(Self::error(column, "a field name", &token)),
            }
            let (mut column, mut token) = self.take();
            if token == Token::Open {
                nodes.push(self.selector()?);
                (column, token) = self.take();
                if token == Token::Open {
                    return Err(Self::error(
                        column,
                        "`.` or the end (one [key: value] per segment)",
                        &token,
                    ));
                }
            }
            match token {
                Token::End => return Ok(Location { nodes }),
                Token::Dot if self.tokens[self.next].1 == Token::End => {
                    let (column, token) = self.take();
                    return Err(Self::error(
                        column,
                        "a field name after `.` (no trailing `.`)",
                        &token,
                    ));
                }
                Token::Dot => {}
                token => return Err(Self::error(column, "`.`, `[` or the end", &token)),
            }
        }
    }

    /// `key: value]`, after the `[`.
    fn selector(&mut self) -> Result<Node, LocationError> {
        let key = match self.take() {
            (_, Token::Ident(key)) => key,
            (column, token) => return Err(Self::error(column, "a key field name", &token)),
        };
        match self.take() {
            (_, Token::Colon) => {}
            (column, token) => return Err(Self::error(column, "`:` after the key field", &token)),
        }
        let value = match self.take() {
            (_, Token::Ident(value)) => KeyValue::Str(value),
            (_, Token::Glob) => KeyValue::Glob,
            (column, Token::Int(digits)) => match digits.parse::<i64>() {
                Ok(int) => KeyValue::Int(int),
                Err(_) => {
                    return Err(LocationError {
                        column,
                        expected: "an integer that fits in 64 bits".into(),
                        found: format!("integer {digits}"),
                    });
                }
            },
            (column, token) => {
                return Err(Self::error(
                    column,
                    "a key value (a name, an integer or *)",
                    &token,
                ));
            }
        };
        match self.take() {
            (_, Token::Close) => Ok(Node::List { key, value }),
            (column, token) => Err(Self::error(column, "`]`", &token)),
        }
    }
}

/// Prints a name so that it parses back: bare when it is a non-empty run of `[A-Za-z0-9_-]` not
/// starting with a digit, double-quoted (with `\` before `"` and `\`) otherwise. Gatekeeper leaves
/// `/` unquoted, which does not parse back; outfit quotes it.
pub fn quote(name: &str) -> String {
    let bare = name.chars().next().is_some_and(|c| !c.is_ascii_digit()) && name.chars().all(is_ident_char);
    if bare {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Object(name) => f.write_str(&quote(name)),
            Node::List { key, value } => {
                write!(f, "[{}: ", quote(key))?;
                match value {
                    KeyValue::Str(s) => f.write_str(&quote(s))?,
                    KeyValue::Int(i) => write!(f, "{i}")?,
                    KeyValue::Glob => f.write_str("*")?,
                }
                f.write_str("]")
            }
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, node) in self.nodes.iter().enumerate() {
            if index > 0 && matches!(node, Node::Object(_)) {
                f.write_str(".")?;
            }
            write!(f, "{node}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
