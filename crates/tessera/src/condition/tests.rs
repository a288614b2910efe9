use proptest::prelude::*;

use super::*;
use crate::error::Error;
use crate::schema::{ArrayType, Attribute, CellValNum, Dimension};

fn schema() -> ArraySchema {
    let mut n = Attribute::new("n", Datatype::Int16);
    n.nullable = true;
    let mut s = Attribute::new("s", Datatype::Utf8);
    s.cell_val_num = CellValNum::Var;
    let mut pair = Attribute::new("pair", Datatype::Int32);
    pair.cell_val_num = CellValNum::Fixed(2);
    ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("x", Datatype::Int64, (0, 99), 10))
        .attr(Attribute::new("pix", Datatype::Int32))
        .attr(Attribute::new("small", Datatype::Int8))
        .attr(Attribute::new("u", Datatype::UInt64))
        .attr(Attribute::new("v0", Datatype::Float32))
        .attr(Attribute::new("f", Datatype::Float64))
        .attr(n)
        .attr(s)
        .attr(pair)
        .build()
        .unwrap()
}

#[test]
fn parses_precedence_parentheses_and_every_form() {
    let c = Condition::parse("pix >= 900 and (small == 1 or v0 < -3)").unwrap();
    let want = Condition::attr("pix").ge(900).and(Condition::attr("small").equal(1).or(Condition::attr("v0").lt(-3)));
    assert_eq!(c, want);
    // `and` binds tighter than `or`.
    let c = Condition::parse("a < 1 or b > 2 and c = 3").unwrap();
    let want = Condition::attr("a").lt(1).or(Condition::attr("b").gt(2).and(Condition::attr("c").equal(3)));
    assert_eq!(c, want);
    let c = Condition::parse("NOT f BETWEEN -1.5 AND 2e3 or `my attr` != 'it''s' or n is not null").unwrap_err();
    assert!(matches!(c, Error::Query(QueryError::ConditionSyntax { .. })), "{c}");
    let c =
        Condition::parse(r#"not f between -1.5 and 2e3 or `my attr` != "x\"y" or n is not null or n is null"#).unwrap();
    let want = (!Condition::attr("f").between(-1.5, 2000.0))
        .or(Condition::attr("my attr").not_equal("x\"y"))
        .or(Condition::attr("n").is_not_null())
        .or(Condition::attr("n").is_null());
    assert_eq!(c, want);
    assert_eq!(Condition::parse("f > -inf").unwrap(), Condition::attr("f").gt(f64::NEG_INFINITY));
    assert_eq!(Condition::parse("u <= 18446744073709551615").unwrap(), Condition::attr("u").le(u64::MAX));
}

#[test]
fn display_parses_back() {
    for text in ["pix >= 900 and (small == 1 or v0 < -3.5)", "not (`a b` between 1 and 2) or s == \"q\"", "n is null"] {
        let c = Condition::parse(text).unwrap();
        assert_eq!(Condition::parse(&c.to_string()).unwrap(), c, "{c}");
    }
}

#[test]
fn syntax_errors_say_where_and_what() {
    let cases = [
        ("", 0, "empty"),
        ("pix >", 5, "expected a value, found the end"),
        ("pix >= 900 and", 14, "expected an attribute name"),
        ("(pix > 1", 8, "expected \")\""),
        ("pix > 1 pix", 8, "unexpected \"pix\""),
        ("pix ! 3", 4, "\"!\" must be followed"),
        ("pix between 1 or 2", 14, "expected \"and\""),
        ("pix > 1x", 6, "is not a number"),
        ("pix > - - 1", 8, "more than one sign"),
        ("pix is nul", 7, "expected \"null\""),
        ("pix ~ 1", 4, "unexpected character"),
        ("s == \"abc", 5, "unclosed string"),
        ("and > 1", 0, "expected an attribute name"),
    ];
    for (text, at, what) in cases {
        match Condition::parse(text) {
            Err(Error::Query(QueryError::ConditionSyntax { at: a, detail, expr })) => {
                assert_eq!((a, &expr[..]), (at, text), "{text}: {detail}");
                assert!(detail.contains(what), "{text}: {detail}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    let deep = format!("{}pix > 1{}", "(".repeat(1000), ")".repeat(1000));
    assert!(Condition::parse(&deep).unwrap_err().to_string().contains("nested more than"));
}

#[test]
fn binding_errors_name_the_attribute_and_the_problem() {
    let s = schema();
    let cases: [(&str, &str, &str); 12] = [
        ("small > 300", "small", "outside the range [-128, 127] of int8"),
        ("u >= -1", "u", "outside the range"),
        ("pix == 2.5", "pix", "not an integer"),
        ("pix == nan", "pix", "not an integer"),
        ("f > nan", "f", "NaN compares with nothing"),
        ("v0 < 1e300", "v0", "outside the range of float32"),
        ("f == 9007199254740993", "f", "not exactly representable"),
        ("s < \"a\"", "s", "only == and !="),
        ("s == 3", "s", "string literal"),
        ("pix == \"3\"", "pix", "a string"),
        ("pair > 1", "pair", "multi-value"),
        ("pix is null", "pix", "not nullable"),
    ];
    for (text, attr, what) in cases {
        let e = Condition::parse(text).unwrap().bind(&s).unwrap_err();
        assert_eq!(e.context().attribute.as_deref(), Some(attr), "{text}");
        assert!(e.to_string().contains(what), "{text}: {e}");
    }
    let e = Condition::parse("pix between 5 and 3").unwrap().bind(&s).unwrap_err();
    assert!(e.to_string().contains("low bound exceeds"), "{e}");
    let e = Condition::parse("pix > 1 and nope < 3").unwrap().bind(&s).unwrap_err();
    assert!(matches!(e, Error::Query(QueryError::UnknownAttribute { ref name, .. }) if name == "nope"), "{e}");
    // Integral floats on integer attributes and integers on float attributes are exact.
    assert!(Condition::parse("pix == 3.0 and f < 3 and v0 >= -inf").unwrap().bind(&s).is_ok());
}

/// The three-valued reference: `None` is unknown (a null or NaN operand).
fn reference(c: &Condition, row: &Row) -> Option<bool> {
    let cmp = |attr: &str, op: CmpOp, v: &Value| -> Option<bool> {
        let x = row.get(attr)?;
        let v = match v {
            Value::Int(i) => *i as f64,
            Value::Float(f) => *f,
            Value::Str(_) | Value::Bool(_) => unreachable!(),
        };
        if x.is_nan() {
            return None;
        }
        Some(match op {
            CmpOp::Lt => x < v,
            CmpOp::Le => x <= v,
            CmpOp::Gt => x > v,
            CmpOp::Ge => x >= v,
            CmpOp::Eq => x == v,
            CmpOp::Ne => x != v,
        })
    };
    match c {
        Condition::Cmp { attr, op, value } => cmp(attr, *op, value),
        Condition::Between { attr, lo, hi } => {
            let (a, b) = (cmp(attr, CmpOp::Ge, lo), cmp(attr, CmpOp::Le, hi));
            kleene_and(a, b)
        }
        Condition::IsNull { attr, null } => Some((row.get(attr).is_none()) == *null),
        Condition::And(a, b) => kleene_and(reference(a, row), reference(b, row)),
        Condition::Or(a, b) => match (reference(a, row), reference(b, row)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        Condition::Not(a) => reference(a, row).map(|x| !x),
    }
}

fn kleene_and(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

/// One cell: pix (int32), f (float64, maybe NaN), n (nullable int16: None when null).
#[derive(Debug, Clone)]
struct Row {
    pix: i32,
    f: f64,
    n: Option<i16>,
}

impl Row {
    fn get(&self, attr: &str) -> Option<f64> {
        match attr {
            "pix" => Some(f64::from(self.pix)),
            "f" => Some(self.f),
            _ => self.n.map(f64::from),
        }
    }
}

fn leaf() -> impl Strategy<Value = Condition> {
    let op = prop_oneof![
        Just(CmpOp::Lt),
        Just(CmpOp::Le),
        Just(CmpOp::Gt),
        Just(CmpOp::Ge),
        Just(CmpOp::Eq),
        Just(CmpOp::Ne)
    ];
    prop_oneof![
        (prop_oneof![Just("pix"), Just("n")], op.clone(), -4i64..4).prop_map(|(a, op, v)| Condition::Cmp {
            attr: a.into(),
            op,
            value: v.into()
        }),
        (op, -4i64..4).prop_map(|(op, v)| Condition::Cmp { attr: "f".into(), op, value: (v as f64 / 2.0).into() }),
        (-4i64..2, 0i64..4).prop_map(|(lo, w)| Condition::attr("pix").between(lo, lo + w)),
        any::<bool>().prop_map(|null| Condition::IsNull { attr: "n".into(), null }),
    ]
}

fn condition() -> impl Strategy<Value = Condition> {
    leaf().prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| a.and(b)),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| a.or(b)),
            inner.prop_map(|a| !a),
        ]
    })
}

fn row() -> impl Strategy<Value = Row> {
    (-4i32..4, prop_oneof![(-8i32..8).prop_map(|v| f64::from(v) / 4.0), Just(f64::NAN)], proptest::option::of(-4i16..4))
        .prop_map(|(pix, f, n)| Row { pix, f, n })
}

proptest! {
    /// Evaluation over columns equals SQL's three-valued logic cell by cell, and the text form
    /// parses back to the same condition.
    #[test]
    fn evaluation_equals_three_valued_reference(c in condition(), rows in proptest::collection::vec(row(), 0..40)) {
        let s = ArraySchema::builder(ArrayType::Sparse)
            .dim(Dimension::new("x", Datatype::Int64, (0, 99), 10))
            .attr(Attribute::new("pix", Datatype::Int32))
            .attr(Attribute::new("f", Datatype::Float64))
            .attr({ let mut n = Attribute::new("n", Datatype::Int16); n.nullable = true; n })
            .build()
            .unwrap();
        let bound = c.bind(&s).unwrap();
        let pix: Vec<u8> = rows.iter().flat_map(|r| r.pix.to_le_bytes()).collect();
        let f: Vec<u8> = rows.iter().flat_map(|r| r.f.to_le_bytes()).collect();
        // Null cells hold a value the condition must not see.
        let n: Vec<u8> = rows.iter().flat_map(|r| r.n.unwrap_or(0).to_le_bytes()).collect();
        let nv: Vec<u8> = rows.iter().map(|r| u8::from(r.n.is_some())).collect();
        let cols = [
            (0, Column::Fixed { data: &pix, validity: None }),
            (1, Column::Fixed { data: &f, validity: None }),
            (2, Column::Fixed { data: &n, validity: Some(&nv) }),
        ];
        let got = eval(&bound.pred, rows.len(), &s.attrs, &cols);
        let want: Vec<bool> = rows.iter().map(|r| reference(&c, r) == Some(true)).collect();
        prop_assert_eq!(got, want, "{}", c);
        prop_assert_eq!(Condition::parse(&c.to_string()).unwrap(), c);
    }
}

#[test]
fn strings_compare_by_bytes() {
    let s = schema();
    let b = Condition::parse("s == \"ab\" or s == ''").unwrap().bind(&s).unwrap();
    let data = b"abxab";
    let offsets = [0u64, 2, 3, 3];
    let cols = [(6, Column::Var { data, offsets: &offsets, validity: None })];
    assert_eq!(eval(&b.pred, 4, &s.attrs, &cols), vec![true, false, true, true]);
    let b = Condition::parse("s != 'x'").unwrap().bind(&s).unwrap();
    assert_eq!(eval(&b.pred, 4, &s.attrs, &cols), vec![true, false, true, true]);
}

proptest! {
    /// Any text, including mutations of valid conditions and non-ASCII characters, parses or
    /// fails with a syntax error at a position inside it; it never panics.
    #[test]
    fn arbitrary_text_parses_or_fails_cleanly(
        text in prop_oneof![
            ".{0,40}",
            "[a-z() <>=!.`'\"0-9eE+-]{0,40}",
            (condition(), 0usize..60, ".{0,3}").prop_map(|(c, at, ins)| {
                let mut s = c.to_string();
                let at = (0..=at.min(s.len())).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
                s.insert_str(at, &ins);
                s
            }),
        ]
    ) {
        match Condition::parse(&text) {
            Ok(c) => {
                // What parses binds or fails with a query error, never a panic.
                let _ = c.bind(&schema());
            }
            Err(Error::Query(QueryError::ConditionSyntax { at, expr, .. })) => {
                prop_assert!(at <= text.len());
                prop_assert_eq!(expr, text);
            }
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}

/// Bool and datetime64 literals: keywords, ISO text and `datetime64('...')` parse, print and
/// parse back; binding checks the operator and converts the text to the attribute's unit.
#[test]
fn bool_and_time_literals() {
    use crate::schema::{ArrayType, Attribute, Datatype, Dimension, TimeUnit};
    let s = crate::schema::ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("d", Datatype::Int64, (0, 9), 5))
        .attr(Attribute::new("b", Datatype::Bool))
        .attr(Attribute::new("t", Datatype::Datetime64(TimeUnit::Second)))
        .build()
        .unwrap();
    for text in [
        "b == true and t >= '1970-01-01T00:01'",
        "b != FALSE or t < datetime64('1969-12-31')",
        "t between -5 and '1970-01-02'",
    ] {
        let c = Condition::parse(text).unwrap();
        assert_eq!(Condition::parse(&c.to_string()).unwrap(), c, "{text}");
        assert!(c.bind(&s).is_ok(), "{text}");
    }
    let c = Condition::parse("t >= '1970-01-01T00:01'").unwrap().bind(&s).unwrap();
    assert!(matches!(c.pred, Pred::Cmp { lit: Lit::Int(60), .. }), "{c:?}");
    let err = |t: &str| Condition::parse(t).unwrap().bind(&s).unwrap_err().to_string();
    assert!(err("b > false").contains("only == and !="));
    assert!(err("t > true").contains("ISO 8601 string or an integer"));
    assert!(err("t > '1970-01-01T00:00:00.5'").contains("finer than the unit s"));
    assert!(err("t between '1971' and '1970'").contains("low bound exceeds"));
    assert!(Condition::parse("t > datetime64(3)").is_err());
}
