//! The text syntax of conditions (see the module documentation of `condition`), parsed by
//! recursive descent over a token list. Grammar:
//!
//! ```text
//! or      := and ("or" and)*
//! and     := unary ("and" unary)*
//! unary   := "not" unary | "(" or ")" | name rest
//! rest    := op literal | "between" literal "and" literal | "is" ["not"] "null"
//! op      := "<" | "<=" | ">" | ">=" | "==" | "=" | "!="
//! literal := ["-" | "+"] (number | "inf") | "nan" | string
//! name    := identifier | "`" any text without backticks "`"
//! ```
//!
//! Errors give the character position (0-based) of the token where parsing failed.

use super::{CmpOp, Condition, Value};
use crate::error::{QueryError, Result};

/// Nesting deeper than this is refused (it would only exhaust the stack).
const MAX_DEPTH: usize = 256;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// A name in backticks: never a keyword.
    Quoted(String),
    Num(Value),
    Str(String),
    Op(CmpOp),
    LParen,
    RParen,
    Minus,
    Plus,
}

/// Whether `s` can be written without backticks.
pub(super) fn is_plain_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        && !KEYWORDS.iter().any(|k| s.eq_ignore_ascii_case(k))
}

const KEYWORDS: [&str; 8] = ["and", "or", "not", "between", "is", "null", "inf", "nan"];

struct Parser<'a> {
    text: &'a str,
    toks: Vec<(Tok, usize)>,
    pos: usize,
    depth: usize,
}

pub(super) fn parse(text: &str) -> Result<Condition> {
    let toks = lex(text)?;
    let mut p = Parser { text, toks, pos: 0, depth: 0 };
    if p.toks.is_empty() {
        return Err(p.err(0, "the condition is empty"));
    }
    let c = p.or()?;
    if let Some((t, at)) = p.toks.get(p.pos) {
        return Err(p.err(*at, &format!("unexpected {} after a complete condition", describe(t))));
    }
    Ok(c)
}

fn syntax(text: &str, at: usize, detail: &str) -> crate::error::Error {
    QueryError::ConditionSyntax { expr: text.to_string(), at, detail: detail.to_string() }.into()
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("{s:?}"),
        Tok::Quoted(s) => format!("`{s}`"),
        Tok::Num(v) => format!("number {v}"),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::Op(o) => format!("{:?}", o.symbol()),
        Tok::LParen => "\"(\"".into(),
        Tok::RParen => "\")\"".into(),
        Tok::Minus => "\"-\"".into(),
        Tok::Plus => "\"+\"".into(),
    }
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let two = b.get(i + 1).copied();
        let tok = match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'(' | b')' | b'-' | b'+' => {
                i += 1;
                match c {
                    b'(' => Tok::LParen,
                    b')' => Tok::RParen,
                    b'-' => Tok::Minus,
                    _ => Tok::Plus,
                }
            }
            b'<' | b'>' | b'=' | b'!' => {
                let (op, len) = match (c, two) {
                    (b'<', Some(b'=')) => (CmpOp::Le, 2),
                    (b'<', _) => (CmpOp::Lt, 1),
                    (b'>', Some(b'=')) => (CmpOp::Ge, 2),
                    (b'>', _) => (CmpOp::Gt, 1),
                    (b'=', Some(b'=')) => (CmpOp::Eq, 2),
                    (b'=', _) => (CmpOp::Eq, 1),
                    (b'!', Some(b'=')) => (CmpOp::Ne, 2),
                    _ => return Err(syntax(text, i, "\"!\" must be followed by \"=\" (use \"not\" to negate)")),
                };
                i += len;
                Tok::Op(op)
            }
            b'`' => {
                let end = text[i + 1..].find('`').ok_or_else(|| syntax(text, i, "unclosed backtick"))?;
                let name = &text[i + 1..i + 1 + end];
                i += end + 2;
                Tok::Quoted(name.to_string())
            }
            b'"' | b'\'' => {
                let (s, len) = lex_string(text, i)?;
                i += len;
                Tok::Str(s)
            }
            b'0'..=b'9' | b'.' => {
                let len = b[i..]
                    .iter()
                    .enumerate()
                    .take_while(|&(k, &x)| {
                        x.is_ascii_alphanumeric()
                            || x == b'.'
                            || ((x == b'-' || x == b'+') && k > 0 && matches!(b[i + k - 1], b'e' | b'E'))
                    })
                    .count();
                let s = &text[i..i + len];
                i += len;
                Tok::Num(number(s).ok_or_else(|| syntax(text, start, &format!("{s:?} is not a number")))?)
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let len = b[i..].iter().take_while(|x| x.is_ascii_alphanumeric() || **x == b'_').count();
                i += len;
                Tok::Ident(text[start..i].to_string())
            }
            _ => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return Err(syntax(text, i, &format!("unexpected character {ch:?}")));
            }
        };
        out.push((tok, start));
    }
    Ok(out)
}

/// A quoted string starting at `i` (quote `"` or `'`, backslash escapes `\\`, `\"`, `\'`):
/// its value and its length in the text.
fn lex_string(text: &str, i: usize) -> Result<(String, usize)> {
    let quote = text.as_bytes()[i] as char;
    let mut s = String::new();
    let mut chars = text[i + 1..].char_indices();
    while let Some((k, ch)) = chars.next() {
        match ch {
            '\\' => match chars.next() {
                Some((_, e @ ('\\' | '"' | '\''))) => s.push(e),
                _ => return Err(syntax(text, i + 1 + k, "a backslash escapes only \\, \" and '")),
            },
            c if c == quote => return Ok((s, k + 2)),
            c => s.push(c),
        }
    }
    Err(syntax(text, i, "unclosed string"))
}

/// A number: an integer (decimal) or a float (Rust's `f64` syntax).
fn number(s: &str) -> Option<Value> {
    if s.bytes().all(|c| c.is_ascii_digit()) {
        return s.parse::<i128>().ok().map(Value::Int);
    }
    if s.bytes().any(|c| c.is_ascii_alphabetic() && c != b'e' && c != b'E') {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite()).map(Value::Float)
}

impl Parser<'_> {
    fn err(&self, at: usize, detail: &str) -> crate::error::Error {
        syntax(self.text, at, detail)
    }

    /// The position of the next token (the text's end when none).
    fn here(&self) -> usize {
        self.toks.get(self.pos).map_or(self.text.len(), |t| t.1)
    }

    fn keyword(&self, k: &str) -> bool {
        matches!(self.toks.get(self.pos), Some((Tok::Ident(s), _)) if s.eq_ignore_ascii_case(k))
    }

    fn eat_keyword(&mut self, k: &str) -> bool {
        let yes = self.keyword(k);
        self.pos += usize::from(yes);
        yes
    }

    fn expect_keyword(&mut self, k: &str, after: &str) -> Result<()> {
        if self.eat_keyword(k) {
            return Ok(());
        }
        Err(self.err(self.here(), &format!("expected \"{k}\" {after}, found {}", self.found())))
    }

    fn found(&self) -> String {
        self.toks.get(self.pos).map_or_else(|| "the end".into(), |t| describe(&t.0))
    }

    fn or(&mut self) -> Result<Condition> {
        let mut c = self.and()?;
        while self.eat_keyword("or") {
            c = c.or(self.and()?);
        }
        Ok(c)
    }

    fn and(&mut self) -> Result<Condition> {
        let mut c = self.unary()?;
        while self.eat_keyword("and") {
            c = c.and(self.unary()?);
        }
        Ok(c)
    }

    fn unary(&mut self) -> Result<Condition> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(self.here(), &format!("nested more than {MAX_DEPTH} levels deep")));
        }
        let c = self.unary_inner();
        self.depth -= 1;
        c
    }

    fn unary_inner(&mut self) -> Result<Condition> {
        if self.eat_keyword("not") {
            return Ok(!self.unary()?);
        }
        let at = self.here();
        let attr = match self.toks.get(self.pos).cloned() {
            Some((Tok::LParen, _)) => {
                self.pos += 1;
                let c = self.or()?;
                if !matches!(self.toks.get(self.pos), Some((Tok::RParen, _))) {
                    return Err(self.err(self.here(), &format!("expected \")\", found {}", self.found())));
                }
                self.pos += 1;
                return Ok(c);
            }
            Some((Tok::Ident(s), _)) if !KEYWORDS.iter().any(|k| s.eq_ignore_ascii_case(k)) => s,
            Some((Tok::Quoted(s), _)) => s,
            _ => return Err(self.err(at, &format!("expected an attribute name, found {}", self.found()))),
        };
        self.pos += 1;
        self.rest(attr)
    }

    /// What follows an attribute name.
    fn rest(&mut self, attr: String) -> Result<Condition> {
        if self.eat_keyword("between") {
            let lo = self.literal()?;
            self.expect_keyword("and", "between the bounds of \"between\"")?;
            let hi = self.literal()?;
            return Ok(Condition::Between { attr, lo, hi });
        }
        if self.eat_keyword("is") {
            let not = self.eat_keyword("not");
            self.expect_keyword("null", if not { "after \"is not\"" } else { "after \"is\"" })?;
            return Ok(Condition::IsNull { attr, null: !not });
        }
        let Some((Tok::Op(op), _)) = self.toks.get(self.pos).cloned() else {
            return Err(self.err(
                self.here(),
                &format!(
                    "expected a comparison (< <= > >= == !=), \"between\" or \"is\" after {attr:?}, found {}",
                    self.found()
                ),
            ));
        };
        self.pos += 1;
        Ok(Condition::Cmp { attr, op, value: self.literal()? })
    }

    /// `datetime64('...')` (the word already seen): the quoted text as a string literal.
    fn datetime_call(&mut self) -> Result<Value> {
        let at = self.here();
        let text = match self.toks.get(self.pos + 1..self.pos + 4) {
            Some([(Tok::LParen, _), (Tok::Str(s), _), (Tok::RParen, _)]) => s.clone(),
            _ => return Err(self.err(at, "datetime64 takes one quoted ISO 8601 text: datetime64('2020-01-01')")),
        };
        self.pos += 4;
        Ok(Value::Str(text))
    }

    fn literal(&mut self) -> Result<Value> {
        let mut neg = false;
        let mut signed = false;
        while let Some((t @ (Tok::Minus | Tok::Plus), _)) = self.toks.get(self.pos) {
            if signed {
                return Err(self.err(self.here(), "more than one sign"));
            }
            neg = *t == Tok::Minus;
            signed = true;
            self.pos += 1;
        }
        let v = match self.toks.get(self.pos).cloned() {
            Some((Tok::Num(v), _)) => v,
            Some((Tok::Ident(s), _)) if s.eq_ignore_ascii_case("inf") => Value::Float(f64::INFINITY),
            Some((Tok::Ident(s), _)) if s.eq_ignore_ascii_case("nan") && !signed => Value::Float(f64::NAN),
            Some((Tok::Str(s), _)) if !signed => Value::Str(s),
            Some((Tok::Ident(s), _)) if s.eq_ignore_ascii_case("true") && !signed => Value::Bool(true),
            Some((Tok::Ident(s), _)) if s.eq_ignore_ascii_case("false") && !signed => Value::Bool(false),
            Some((Tok::Ident(s), _)) if s == "datetime64" && !signed => return self.datetime_call(),
            _ => return Err(self.err(self.here(), &format!("expected a value, found {}", self.found()))),
        };
        self.pos += 1;
        Ok(match v {
            Value::Int(x) if neg => Value::Int(-x),
            Value::Float(x) if neg => Value::Float(-x),
            v => v,
        })
    }
}
