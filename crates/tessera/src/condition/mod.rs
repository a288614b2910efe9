//! Query conditions: a predicate on attribute values that reads evaluate in the engine, so only
//! the cells that pass are returned (sparse reads) or keep their values (dense reads, where the
//! others read as the fill value; see [`crate::ReadQuery::with_condition`]).
//!
//! A [`Condition`] is built with the builder ([`Condition::attr`]) or parsed from text
//! ([`Condition::parse`], the syntax Python and the CLI share):
//!
//! ```text
//! pix >= 900 and (valid == 1 or v0 < -3)
//! v0 between -1.5 and 2.5        (inclusive on both ends)
//! not (a != 3) or b is null
//! name == "M31"                  (variable-length UTF-8 attributes: == and != only)
//! flag == true                   (bool attributes: == and != with true, false, 1 or 0)
//! t >= '2020-01-01T00:00'        (datetime64 attributes: ISO 8601 text, see below)
//! t < datetime64('1969-12-31')   (the same, spelled as numpy does)
//! t between '2020' and 1600000000   (or an integer count of the attribute's unit)
//! ```
//!
//! A datetime64 literal is `[+-]YYYY[-MM[-DD[(T| )hh[:mm[:ss[.f...]]]]]][Z]` (UTC, proleptic
//! Gregorian, as numpy) converted exactly to the attribute's unit: text finer than the unit
//! (`'2020-01-01T01'` on `datetime64[D]`) is an error, never truncated; NaT is refused as a
//! literal. A NaT cell behaves as NaN: every comparison with it is unknown.
//!
//! Keywords (`and`, `or`, `not`, `between`, `is`, `null`, `inf`, `nan`, `true`, `false`) are
//! case-insensitive;
//! `and` binds tighter than `or`; an attribute whose name is not a plain identifier is written in
//! backticks (`` `my attr` > 3 ``).
//!
//! **Semantics.** A condition is evaluated on each result cell's value after fragments are
//! merged (the newest fragment's cell wins) and deletes applied: an older cell never shows
//! through because the newer one failed. Comparisons are exact: integers compare as integers
//! (a literal must be representable in the attribute's type), floats as IEEE 754 doubles (a
//! float32 value is widened exactly). A null cell, and a NaN value, make every comparison
//! *unknown*; as in SQL, `not` of unknown is unknown, and a cell passes only when the whole
//! condition is true. So neither `a < 1` nor `not (a < 1)` passes a null or NaN cell; `a is
//! null` and `a is not null` test validity. Multi-value cells are not supported.
//!
//! Binding a condition to a schema ([`Condition::bind`]) checks it and turns it into negation
//! normal form (`not` pushed down to the comparisons, which is exact under the rule above);
//! `eval.rs` evaluates it over whole columns of cells into a selection.

mod eval;
mod parse;

use crate::error::{QueryError, Result};
use crate::schema::{ArraySchema, Datatype};

pub(crate) use eval::{eval, Column};

/// A literal of a condition.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// An integer (any integer type's values fit).
    Int(i128),
    /// A floating-point number.
    Float(f64),
    /// A UTF-8 string (variable-length UTF-8 attributes; ISO 8601 text for datetime64).
    Str(String),
    /// A boolean (bool attributes).
    Bool(bool),
}

macro_rules! value_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Value {
            fn from(x: $t) -> Self {
                Value::$v(x.into())
            }
        }
    )*};
}
value_from!(i8 => Int, i16 => Int, i32 => Int, i64 => Int, u8 => Int, u16 => Int, u32 => Int, u64 => Int,
            i128 => Int, f32 => Float, f64 => Float, String => Str, &str => Str, bool => Bool);

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v:?}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CmpOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl CmpOp {
    /// The operator that holds exactly when this one does not (on values that compare).
    fn negate(self) -> Self {
        match self {
            CmpOp::Lt => CmpOp::Ge,
            CmpOp::Le => CmpOp::Gt,
            CmpOp::Gt => CmpOp::Le,
            CmpOp::Ge => CmpOp::Lt,
            CmpOp::Eq => CmpOp::Ne,
            CmpOp::Ne => CmpOp::Eq,
        }
    }

    /// The operator's text.
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }
}

/// A predicate on attribute values; see the module documentation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Condition {
    /// `attr op value`.
    Cmp {
        /// Attribute name.
        attr: String,
        /// The comparison.
        op: CmpOp,
        /// The literal compared with.
        value: Value,
    },
    /// `lo <= attr <= hi`.
    Between {
        /// Attribute name.
        attr: String,
        /// Inclusive low bound.
        lo: Value,
        /// Inclusive high bound.
        hi: Value,
    },
    /// `attr is null` (`null: true`) or `attr is not null`.
    IsNull {
        /// Attribute name.
        attr: String,
        /// Whether the cell must be null (or must not).
        null: bool,
    },
    /// Both hold.
    And(Box<Condition>, Box<Condition>),
    /// Either holds.
    Or(Box<Condition>, Box<Condition>),
    /// The condition is false (unknown stays unknown; see the module documentation).
    Not(Box<Condition>),
}

/// An attribute named in a condition being built: `Condition::attr("a").ge(3)`.
#[derive(Debug, Clone)]
pub struct AttrRef(String);

impl AttrRef {
    fn cmp(self, op: CmpOp, v: impl Into<Value>) -> Condition {
        Condition::Cmp { attr: self.0, op, value: v.into() }
    }
    /// `attr < v`.
    pub fn lt(self, v: impl Into<Value>) -> Condition {
        self.cmp(CmpOp::Lt, v)
    }
    /// `attr <= v`.
    pub fn le(self, v: impl Into<Value>) -> Condition {
        self.cmp(CmpOp::Le, v)
    }
    /// `attr > v`.
    pub fn gt(self, v: impl Into<Value>) -> Condition {
        self.cmp(CmpOp::Gt, v)
    }
    /// `attr >= v`.
    pub fn ge(self, v: impl Into<Value>) -> Condition {
        self.cmp(CmpOp::Ge, v)
    }
    /// `attr == v`.
    pub fn equal(self, v: impl Into<Value>) -> Condition {
        self.cmp(CmpOp::Eq, v)
    }
    /// `attr != v`.
    pub fn not_equal(self, v: impl Into<Value>) -> Condition {
        self.cmp(CmpOp::Ne, v)
    }
    /// `lo <= attr <= hi`.
    pub fn between(self, lo: impl Into<Value>, hi: impl Into<Value>) -> Condition {
        Condition::Between { attr: self.0, lo: lo.into(), hi: hi.into() }
    }
    /// `attr is null`.
    pub fn is_null(self) -> Condition {
        Condition::IsNull { attr: self.0, null: true }
    }
    /// `attr is not null`.
    pub fn is_not_null(self) -> Condition {
        Condition::IsNull { attr: self.0, null: false }
    }
}

impl Condition {
    /// Starts a comparison on attribute `name`.
    pub fn attr(name: impl Into<String>) -> AttrRef {
        AttrRef(name.into())
    }

    /// Both `self` and `other` hold.
    #[must_use]
    pub fn and(self, other: Condition) -> Condition {
        Condition::And(Box::new(self), Box::new(other))
    }

    /// `self` or `other` holds.
    #[must_use]
    pub fn or(self, other: Condition) -> Condition {
        Condition::Or(Box::new(self), Box::new(other))
    }

    /// Parses the text syntax of the module documentation.
    ///
    /// # Errors
    /// `QueryError::ConditionSyntax` with the character position and what was expected.
    pub fn parse(text: &str) -> Result<Condition> {
        parse::parse(text)
    }

    /// The attributes the condition reads, each once, in order of appearance.
    pub fn attributes(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        self.visit_attrs(&mut |a| {
            if !out.contains(&a) {
                out.push(a);
            }
        });
        out
    }

    fn visit_attrs<'a>(&'a self, f: &mut impl FnMut(&'a str)) {
        match self {
            Condition::Cmp { attr, .. } | Condition::Between { attr, .. } | Condition::IsNull { attr, .. } => f(attr),
            Condition::And(a, b) | Condition::Or(a, b) => {
                a.visit_attrs(f);
                b.visit_attrs(f);
            }
            Condition::Not(a) => a.visit_attrs(f),
        }
    }

    /// Checks the condition against `schema` and binds it: attribute indices, literals of the
    /// attributes' types, `not` pushed down.
    ///
    /// # Errors
    /// `QueryError::UnknownAttribute` for a name the schema lacks; `QueryError::Condition`
    /// naming the attribute for a literal its type cannot represent (300 on an int8, 2.5 on an
    /// integer, NaN), a reversed `between`, an operator the attribute does not support
    /// (ordering on variable-length strings, any comparison on multi-value cells) and `is null`
    /// on an attribute that is not nullable.
    pub fn bind(&self, schema: &ArraySchema) -> Result<Bound> {
        let mut attrs = Vec::new();
        let pred = bind(self, schema, false, &mut attrs)?;
        Ok(Bound { pred, attrs })
    }
}

impl std::ops::Not for Condition {
    type Output = Condition;
    fn not(self) -> Condition {
        Condition::Not(Box::new(self))
    }
}

impl std::fmt::Display for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = |a: &str| {
            if parse::is_plain_ident(a) {
                a.to_string()
            } else {
                format!("`{a}`")
            }
        };
        match self {
            Condition::Cmp { attr, op, value } => write!(f, "{} {} {value}", name(attr), op.symbol()),
            Condition::Between { attr, lo, hi } => write!(f, "{} between {lo} and {hi}", name(attr)),
            Condition::IsNull { attr, null } => {
                write!(f, "{} is {}null", name(attr), if *null { "" } else { "not " })
            }
            Condition::And(a, b) => write!(f, "({a} and {b})"),
            Condition::Or(a, b) => write!(f, "({a} or {b})"),
            Condition::Not(a) => write!(f, "not ({a})"),
        }
    }
}

/// A literal converted to an attribute's type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    /// Integer attributes (the literal fits the type).
    Int(i128),
    /// Float attributes (compared as f64).
    Float(f64),
    /// Variable-length UTF-8 attributes.
    Bytes(Vec<u8>),
}

/// A condition in negation normal form over attribute indices.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pred {
    /// `attr op lit` on a valid, non-NaN value.
    Cmp { attr: usize, op: CmpOp, lit: Lit },
    /// Whether the cell is (`true`) or is not null.
    Null { attr: usize, null: bool },
    /// All hold.
    And(Vec<Pred>),
    /// One holds.
    Or(Vec<Pred>),
}

/// A condition checked against a schema, ready to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    pub(crate) pred: Pred,
    /// The attribute indices the condition reads, each once.
    pub(crate) attrs: Vec<usize>,
}

impl Bound {
    /// The indices of the attributes the condition reads.
    pub fn attr_indices(&self) -> &[usize] {
        &self.attrs
    }
}

fn bind(c: &Condition, schema: &ArraySchema, negated: bool, attrs: &mut Vec<usize>) -> Result<Pred> {
    match c {
        Condition::Cmp { attr, op, value } => {
            let i = attr_of(schema, attr, attrs)?;
            let op = if negated { op.negate() } else { *op };
            Ok(Pred::Cmp { attr: i, op, lit: literal(schema, i, op, value)? })
        }
        Condition::Between { attr, lo, hi } => {
            let i = attr_of(schema, attr, attrs)?;
            let (l, h) = (literal(schema, i, CmpOp::Ge, lo)?, literal(schema, i, CmpOp::Le, hi)?);
            let reversed = match (&l, &h) {
                (Lit::Int(a), Lit::Int(b)) => a > b,
                (Lit::Float(a), Lit::Float(b)) => a > b,
                _ => false,
            };
            if reversed {
                return Err(cond_err(attr, format!("between {lo} and {hi}: the low bound exceeds the high bound")));
            }
            let (lo, hi) = (Pred::Cmp { attr: i, op: CmpOp::Ge, lit: l }, Pred::Cmp { attr: i, op: CmpOp::Le, lit: h });
            Ok(if negated { Pred::Or(vec![negate_leaf(lo), negate_leaf(hi)]) } else { Pred::And(vec![lo, hi]) })
        }
        Condition::IsNull { attr, null } => {
            let i = attr_of(schema, attr, attrs)?;
            if !schema.attrs[i].nullable {
                return Err(cond_err(attr, "is null: the attribute is not nullable".into()));
            }
            Ok(Pred::Null { attr: i, null: *null != negated })
        }
        Condition::And(a, b) | Condition::Or(a, b) => {
            let (pa, pb) = (bind(a, schema, negated, attrs)?, bind(b, schema, negated, attrs)?);
            // De Morgan: not (a and b) = not a or not b.
            let conj = matches!(c, Condition::And(..)) != negated;
            Ok(join(conj, pa, pb))
        }
        Condition::Not(a) => bind(a, schema, !negated, attrs),
    }
}

/// `a and b` (`conj`) or `a or b`, flattening nested nodes of the same kind.
fn join(conj: bool, a: Pred, b: Pred) -> Pred {
    let mut parts = Vec::new();
    for p in [a, b] {
        match (p, conj) {
            (Pred::And(v), true) | (Pred::Or(v), false) => parts.extend(v),
            (p, _) => parts.push(p),
        }
    }
    if conj {
        Pred::And(parts)
    } else {
        Pred::Or(parts)
    }
}

fn negate_leaf(p: Pred) -> Pred {
    match p {
        Pred::Cmp { attr, op, lit } => Pred::Cmp { attr, op: op.negate(), lit },
        other => other,
    }
}

fn cond_err(attr: &str, detail: String) -> crate::error::Error {
    QueryError::Condition { attr: attr.to_string(), detail }.into()
}

fn attr_of(schema: &ArraySchema, name: &str, attrs: &mut Vec<usize>) -> Result<usize> {
    let i = schema.attr_index(name).ok_or_else(|| QueryError::UnknownAttribute {
        name: name.to_string(),
        known: schema.attrs.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", "),
    })?;
    if !attrs.contains(&i) {
        attrs.push(i);
    }
    Ok(i)
}

/// `value` as a literal of attribute `i`'s type, for operator `op`.
fn literal(schema: &ArraySchema, i: usize, op: CmpOp, value: &Value) -> Result<Lit> {
    let a = &schema.attrs[i];
    let t = a.datatype;
    let err = |why: String| cond_err(&a.name, format!("{} {value}: {why}", op.symbol()));
    if a.is_var() {
        if t != Datatype::Utf8 {
            return Err(err(format!("comparisons on variable-length {t} cells are not supported")));
        }
        if !matches!(op, CmpOp::Eq | CmpOp::Ne) {
            return Err(err("variable-length strings support only == and !=".into()));
        }
        return match value {
            Value::Str(s) => Ok(Lit::Bytes(s.as_bytes().to_vec())),
            _ => Err(err("a variable-length string compares with a string literal".into())),
        };
    }
    if a.cell_size() != t.size() {
        return Err(err(format!(
            "comparisons on multi-value cells ({} values of {t}) are not supported",
            a.cell_size() / t.size()
        )));
    }
    if t == Datatype::Utf8 {
        return Err(err("fixed-size utf8 cells cannot be compared; strings are variable-length".into()));
    }
    if t == Datatype::Bool {
        return bool_literal(op, value).map_err(err);
    }
    if let Some(unit) = t.time_unit() {
        return time_literal(unit, value).map_err(err);
    }
    if let Some((lo, hi)) = t.integer_bounds() {
        let v = match *value {
            Value::Int(v) => v,
            Value::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38 => f as i128,
            Value::Float(_) => return Err(err(format!("not an integer, so not a value of {t}"))),
            Value::Str(_) => return Err(err(format!("a string, not a value of {t}"))),
            Value::Bool(_) => return Err(err(format!("a bool, not a value of {t}"))),
        };
        if v < lo || v > hi {
            return Err(err(format!("outside the range [{lo}, {hi}] of {t}")));
        }
        return Ok(Lit::Int(v));
    }
    let f = match *value {
        Value::Float(f) => f,
        Value::Int(v) if (v as f64) as i128 == v => v as f64,
        Value::Int(_) => return Err(err(format!("not exactly representable as {t}"))),
        Value::Str(_) => return Err(err(format!("a string, not a value of {t}"))),
        Value::Bool(_) => return Err(err(format!("a bool, not a value of {t}"))),
    };
    if f.is_nan() {
        return Err(err("NaN compares with nothing; a NaN cell passes no comparison".into()));
    }
    if t == Datatype::Float32 && f.is_finite() && f.abs() > f64::from(f32::MAX) {
        return Err(err(format!("outside the range of {t}")));
    }
    Ok(Lit::Float(f))
}

/// A literal of a bool attribute: `true`, `false`, 1 or 0, with `==` or `!=`.
fn bool_literal(op: CmpOp, value: &Value) -> std::result::Result<Lit, String> {
    if !matches!(op, CmpOp::Eq | CmpOp::Ne) {
        return Err("bool attributes support only == and !=".into());
    }
    match *value {
        Value::Bool(b) => Ok(Lit::Int(i128::from(b))),
        Value::Int(v @ (0 | 1)) => Ok(Lit::Int(v)),
        _ => Err("a bool compares with true, false, 1 or 0".into()),
    }
}

/// A literal of a datetime64 attribute: an ISO 8601 string, or an integer count of the unit;
/// never NaT (a NaT cell passes no comparison, as a NaN cell).
fn time_literal(unit: crate::schema::TimeUnit, value: &Value) -> std::result::Result<Lit, String> {
    let v = match value {
        Value::Str(s) => i128::from(crate::schema::parse_datetime(s, unit)?),
        Value::Int(v) => *v,
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38 => *f as i128,
        _ => return Err("a datetime64 compares with an ISO 8601 string or an integer count of its unit".into()),
    };
    if v == i128::from(crate::schema::NAT) {
        return Err("NaT compares with nothing; a NaT cell passes no comparison".into());
    }
    if i64::try_from(v).is_err() {
        return Err(format!("outside the range of datetime64[{}]", unit.code()));
    }
    Ok(Lit::Int(v))
}

#[cfg(test)]
mod tests;
