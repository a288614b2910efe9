//! Random updates of dense arrays (sparse fragments of cells) that give a coordinate more than
//! once: like numpy assignment, the last value given wins. Model-based: random update fragments
//! (unordered, or in global order over several submits) with repeated coordinates, a fixed and a
//! nullable variable-length attribute, reads with and without the update index, before and
//! after consolidation, each compared with a map from coordinates to the newest value.

use std::collections::HashMap;

use proptest::prelude::*;
use tessera::*;

use crate::common::*;

/// Rows and columns of the array; tiles of 3 x 4 (neither divides the domain).
const SIDE: i64 = 10;

type Value = (i32, Option<Vec<u8>>);

fn schema() -> ArraySchema {
    let mut v = Attribute::new("v", Datatype::UInt8);
    v.cell_val_num = CellValNum::Var;
    v.nullable = true;
    ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 0, i128::from(SIDE) - 1, 3))
        .dim(dim("c", 0, i128::from(SIDE) - 1, 4))
        .attr(Attribute::new("a", Datatype::Int32))
        .attr(v)
        .build()
        .unwrap()
}

/// The global order of a cell: row-major tiles of 3 x 4, row-major cells inside.
fn global_key(p: (i64, i64)) -> (i64, i64, i64, i64) {
    (p.0 / 3, p.1 / 4, p.0 % 3, p.1 % 4)
}

fn value_of(seed: u64, k: usize) -> Value {
    let x = seed.wrapping_mul(6364136223846793005).wrapping_add((k as u64 + 1).wrapping_mul(1442695040888963407));
    let v = (x >> 60 != 0).then(|| (0..(x >> 40) % 4).map(|j| (x >> (8 * j)) as u8).collect());
    ((x >> 32) as i32, v)
}

/// Writes `cells` (coordinates and values, in the order given: a coordinate may repeat) as one
/// update fragment, in `submits` global-order submits when `global` (cells sorted stably by
/// global order, so repeated coordinates keep their order), else unordered.
fn write_update(array: &Array, cells: &[((i64, i64), Value)], global: bool, submits: usize) -> Result<(), Error> {
    let mut cells = cells.to_vec();
    let mut w = if global {
        cells.sort_by_key(|(p, _)| global_key(*p));
        array.sparse_writer(Layout::Global)?
    } else {
        array.sparse_writer(Layout::Unordered)?
    };
    let step = cells.len().div_ceil(submits.max(1)).max(1);
    for part in cells.chunks(step) {
        let rs: Vec<i64> = part.iter().map(|(p, _)| p.0).collect();
        let cs: Vec<i64> = part.iter().map(|(p, _)| p.1).collect();
        let a: Vec<i32> = part.iter().map(|(_, v)| v.0).collect();
        let (mut data, mut offs, mut valid) = (Vec::new(), Vec::new(), Vec::new());
        for (_, (_, v)) in part {
            offs.push(data.len() as u64);
            valid.push(u8::from(v.is_some()));
            data.extend(v.iter().flatten());
        }
        w.submit(
            &[
                CoordInput { name: "r", data: bytemuck::cast_slice(&rs) },
                CoordInput { name: "c", data: bytemuck::cast_slice(&cs) },
            ],
            &[
                AttrInput::fixed("a", i32_bytes(&a)),
                AttrInput { name: "v", data: &data, offsets: Some(&offs), validity: Some(&valid) },
            ],
        )?;
    }
    w.finish()?;
    Ok(())
}

fn check(ctx: &Context, model: &HashMap<(i64, i64), Value>) -> Result<(), TestCaseError> {
    let r = Array::open(ctx, "/u", Mode::Read).unwrap();
    let res = r.read(&Subarray::full(r.schema()), &["a", "v"], Layout::RowMajor).unwrap();
    let a = as_i32(&res.attrs[0].data);
    let v = &res.attrs[1];
    let (offs, valid) = (v.offsets.as_ref().unwrap(), v.validity.as_ref().unwrap());
    for k in 0..(SIDE * SIDE) as usize {
        let p = (k as i64 / SIDE, k as i64 % SIDE);
        let end = offs.get(k + 1).copied().unwrap_or(v.data.len() as u64) as usize;
        let got: Value = (a[k], (valid[k] == 1).then(|| v.data[offs[k] as usize..end].to_vec()));
        let want = model.get(&p).cloned().unwrap_or((i32::MIN, None));
        prop_assert_eq!(got, want, "cell {:?}", p);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]
    /// Every update fragment repeats coordinates; reads show each coordinate's last value.
    #[test]
    fn the_last_value_given_for_a_coordinate_wins(
        updates in prop::collection::vec(
            (prop::collection::vec((0..SIDE, 0..SIDE), 1..40), any::<bool>(), 1usize..4, any::<u64>()), 1..5),
        index in any::<bool>(),
    ) {
        let ctx = mem_ctx_indexed(index);
        Array::create(&ctx, "/u", &schema()).unwrap();
        let w = Array::open(&ctx, "/u", Mode::Write).unwrap();
        let mut model: HashMap<(i64, i64), Value> = HashMap::new();
        for (pts, global, submits, seed) in &updates {
            // Coordinates repeat often: points drawn from a tenth of the array.
            let cells: Vec<((i64, i64), Value)> =
                pts.iter().enumerate().map(|(k, &(r, c))| ((r % 3, c % 4), value_of(*seed, k))).collect();
            let mut sorted = cells.clone();
            if *global {
                sorted.sort_by_key(|(p, _)| global_key(*p));
                // Repeats split over two submits are refused (see below): one submit here.
                write_update(&w, &cells, true, if *submits > 1 && has_split_repeat(&sorted, *submits) { 1 } else { *submits })
                    .unwrap();
            } else {
                write_update(&w, &cells, false, 1).unwrap();
            }
            for (p, v) in sorted {
                model.insert(p, v);
            }
        }
        check(&ctx, &model)?;
        consolidate(&ctx, "/u", &Selection::All).unwrap();
        check(&ctx, &model)?;
    }
}

/// Whether cutting `cells` into `submits` parts puts two cells of one coordinate in different
/// submits.
fn has_split_repeat(cells: &[((i64, i64), Value)], submits: usize) -> bool {
    let step = cells.len().div_ceil(submits.max(1)).max(1);
    (step..cells.len()).step_by(step).any(|k| cells[k - 1].0 == cells[k].0)
}

/// The fragment of an update holds each coordinate once: its cell count is the number of
/// distinct coordinates.
#[test]
fn an_update_fragment_holds_each_coordinate_once() {
    let ctx = mem_ctx();
    Array::create(&ctx, "/u", &schema()).unwrap();
    let w = Array::open(&ctx, "/u", Mode::Write).unwrap();
    let cells: Vec<((i64, i64), Value)> =
        [(1, 1), (2, 2), (1, 1), (1, 1)].iter().enumerate().map(|(k, &p)| (p, (k as i32, None))).collect();
    write_update(&w, &cells, false, 1).unwrap();
    let r = Array::open(&ctx, "/u", Mode::Read).unwrap();
    assert_eq!(r.fragments()[0].cell_count, 2);
    let res = r.read(&Subarray::from_ranges(&[(1, 2), (1, 2)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(as_i32(&res.attrs[0].data), [3, i32::MIN, i32::MIN, 1]);
}

/// A global-order update whose submit starts with the coordinates the previous submit ended
/// with is refused (that cell may already be written), with a message that does not name the
/// sparse-only schema option.
#[test]
fn a_repeat_across_global_submits_is_refused_clearly() {
    let ctx = mem_ctx();
    Array::create(&ctx, "/u", &schema()).unwrap();
    let w = Array::open(&ctx, "/u", Mode::Write).unwrap();
    let cells: Vec<((i64, i64), Value)> = [(1, 1), (1, 1)].iter().map(|&p| (p, (0, None))).collect();
    let e = write_update(&w, &cells, true, 2).unwrap_err().to_string();
    assert!(e.contains("repeats the coordinates (1, 1) of the previous submit"), "{e}");
    assert!(e.contains("gives each cell once across its submits") && !e.contains("schema"), "{e}");
}
