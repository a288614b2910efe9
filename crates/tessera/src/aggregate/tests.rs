use super::partial::{accumulate, Cells, Partial};
use super::*;
use crate::schema::{ArrayType, Attribute, Dimension};

fn resolved(op: AggregateOp, datatype: Datatype) -> Resolved {
    Resolved { attr: 0, op, datatype }
}

/// Aggregates `values` split at every possible point and merged: the same as in one piece.
fn split_agrees(op: AggregateOp, dt: Datatype, data: &[u8], validity: Option<&[u8]>, keep: Option<&[bool]>) -> Partial {
    let r = resolved(op, dt);
    let n = data.len() / dt.size();
    let cells = Cells { data, validity, keep };
    let whole = accumulate(&r, &cells, 0..n);
    for cut in 0..=n {
        let mut p = accumulate(&r, &cells, 0..cut);
        p.merge(accumulate(&r, &cells, cut..n), op, "a").unwrap();
        assert_eq!(p, whole, "{op:?} cut at {cut}");
    }
    whole
}

#[test]
fn integers_counts_and_extremes() {
    let v: Vec<i32> = vec![5, -7, 3, i32::MAX, 9];
    let data: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let validity = [1u8, 1, 0, 1, 1];
    let keep = [true, true, true, true, false];
    let f = |op| split_agrees(op, Datatype::Int32, &data, Some(&validity), Some(&keep)).finish();
    assert_eq!(f(AggregateOp::Count), AggregateValue::Count(4));
    assert_eq!(f(AggregateOp::CountValid), AggregateValue::Count(3));
    assert_eq!(f(AggregateOp::NullCount), AggregateValue::Count(1));
    assert_eq!(f(AggregateOp::Sum), AggregateValue::Int(5 - 7 + i128::from(i32::MAX)));
    assert_eq!(f(AggregateOp::Min), AggregateValue::Int(-7));
    assert_eq!(f(AggregateOp::Max), AggregateValue::Int(i32::MAX.into()));
    let mean = split_agrees(AggregateOp::Mean, Datatype::Int32, &data, Some(&validity), Some(&keep)).mean();
    assert_eq!(mean, AggregateValue::Float((5.0 - 7.0 + f64::from(i32::MAX)) / 3.0));
}

#[test]
fn u64_sums_are_exact_and_overflow_is_an_error() {
    let data: Vec<u8> = [u64::MAX; 3].iter().flat_map(|x| x.to_le_bytes()).collect();
    let s = split_agrees(AggregateOp::Sum, Datatype::UInt64, &data, None, None).finish();
    assert_eq!(s, AggregateValue::Int(3 * i128::from(u64::MAX)));
    let mut p = Partial::IntSum { sum: i128::MAX - 1, n: 1 };
    let e = p.merge(Partial::IntSum { sum: 2, n: 1 }, AggregateOp::Sum, "big").unwrap_err().to_string();
    assert!(e.contains("big") && e.contains("sum"), "{e}");
}

#[test]
fn floats_skip_nan_and_empty_gives_null() {
    let v = [1.5f64, f64::NAN, -2.0, f64::INFINITY];
    let data: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let f = |op| split_agrees(op, Datatype::Float64, &data, None, None);
    assert_eq!(f(AggregateOp::Sum).finish(), AggregateValue::Float(f64::INFINITY));
    assert_eq!(f(AggregateOp::Min).finish(), AggregateValue::Float(-2.0));
    assert_eq!(f(AggregateOp::Max).finish(), AggregateValue::Float(f64::INFINITY));
    assert_eq!(f(AggregateOp::Count).finish(), AggregateValue::Count(4));
    let none = [false; 4];
    let g = |op| split_agrees(op, Datatype::Float64, &data, None, Some(&none));
    assert_eq!(g(AggregateOp::Sum).finish(), AggregateValue::Float(0.0));
    assert_eq!(g(AggregateOp::Min).finish(), AggregateValue::Null);
    assert_eq!(g(AggregateOp::Mean).mean(), AggregateValue::Null);
    let nan_only: Vec<u8> = f32::NAN.to_le_bytes().to_vec();
    let m = split_agrees(AggregateOp::Max, Datatype::Float32, &nan_only, None, None);
    assert_eq!(m.finish(), AggregateValue::Null);
}

#[test]
fn requests_are_checked_against_the_schema() {
    let mut s = Attribute::new("s", Datatype::Utf8);
    s.cell_val_num = CellValNum::Var;
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("d", Datatype::Int64, (0, 9), 5))
        .attr(Attribute::new("n", Datatype::Int32))
        .attr(s)
        .build()
        .unwrap();
    let err = |attr: &str, op| resolve(&schema, &[AggregateRequest::new(attr, op)]).unwrap_err().to_string();
    assert!(err("s", AggregateOp::Sum).contains("aggregate sum of attribute s"));
    assert!(err("x", AggregateOp::Count).contains("unknown attribute \"x\""));
    assert!(resolve(&schema, &[AggregateRequest::new("s", AggregateOp::NullCount)]).is_ok());
    assert!(resolve(&schema, &[]).is_err());
    for op in AggregateOp::ALL {
        assert_eq!(AggregateOp::parse(op.name()), Some(op));
    }
}
