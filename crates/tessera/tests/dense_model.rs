//! Model-based property test: random schemas, random sequences of dense writes (any layout,
//! several submits), random reads (several ranges per dimension, any layout, whole or in parts),
//! every read compared with a reference model (a map from coordinates to the newest values).

use std::collections::HashMap;

use proptest::prelude::*;
use tessera::*;

use crate::common::*;

/// Consolidates a consecutive run of fragments chosen by `pick` (or all of them).
fn consolidate_some(ctx: &Context, uri: &str, pick: u64) {
    let names: Vec<String> =
        Array::open(ctx, uri, Mode::Read).unwrap().fragments().iter().map(|f| f.name.to_string()).collect();
    if names.len() < 2 {
        return;
    }
    let sel = if pick.is_multiple_of(3) {
        Selection::All
    } else {
        let start = (pick as usize / 3) % (names.len() - 1);
        let len = 2 + (pick as usize / 11) % (names.len() - start - 1);
        Selection::Names(names[start..start + len].to_vec())
    };
    if let Err(e) = consolidate(ctx, uri, &sel) {
        // Deletions in a run that does not start at the oldest fragment cannot go into a sparse
        // output: that refusal is the only acceptable error.
        assert!(e.to_string().contains("start the run at the oldest fragment"), "{e}");
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Cell {
    a: i32,
    v: Option<Vec<i16>>, // None = null
}

#[derive(Debug, Clone)]
struct Case {
    dims: Vec<(i128, u64, u64)>, // (lo, size, tile)
    filters: (Vec<Filter>, Vec<Filter>),
    cell_order: CellOrder,
    tile_order: CellOrder,
    writes: Vec<(Vec<(i128, i128)>, Layout, u64, usize)>, // rect, layout, seed, submits
    /// Before write i: random cell updates (points) written as a sparse fragment.
    updates: Vec<Vec<Vec<i128>>>,
    reads: Vec<(Vec<Vec<(i128, i128)>>, Layout, u64)>, // ranges, layout, buffer cells (0 = whole)
    /// Every read is repeated with this condition (failing cells read as the fill value).
    cond: Condition,
}

fn filter_strategy() -> impl Strategy<Value = Vec<Filter>> {
    let one = prop_oneof![
        (0u32..10).prop_map(|level| Filter::Gzip { level }),
        (-3i32..10).prop_map(|level| Filter::Zstd { level }),
        Just(Filter::Lz4),
        Just(Filter::Rle),
        Just(Filter::Delta),
        Just(Filter::ByteShuffle),
    ];
    prop::collection::vec(one, 0..3)
}

fn range_in(lo: i128, size: u64) -> impl Strategy<Value = (i128, i128)> {
    (0..size, 0..size).prop_map(move |(a, b)| (lo + a.min(b) as i128, lo + a.max(b) as i128))
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let dims =
        prop::collection::vec((-5i128..5, 1u64..9).prop_flat_map(|(lo, size)| (Just(lo), Just(size), 1..=size)), 1..4);
    (dims, order_strategy(), order_strategy()).prop_flat_map(|(dims, co, to)| {
        let rect = dims.iter().map(|&(lo, size, _)| range_in(lo, size)).collect::<Vec<_>>();
        let writes = prop::collection::vec((rect, layout_strategy(), any::<u64>(), 1usize..4), 0..5);
        let point = dims.iter().map(|&(lo, size, _)| (0..size).prop_map(move |o| lo + o as i128)).collect::<Vec<_>>();
        let updates = prop::collection::vec(prop::collection::vec(point, 0..6), 0..5);
        let ranges =
            dims.iter().map(|&(lo, size, _)| prop::collection::vec(range_in(lo, size), 1..3)).collect::<Vec<_>>();
        let reads = prop::collection::vec((ranges, layout_strategy(), prop_oneof![Just(0u64), 1u64..20]), 1..4);
        let filters = (filter_strategy(), filter_strategy());
        let cond = cond_strategy(i32::MIN, i32::MAX);
        (Just(dims), Just(co), Just(to), writes, reads, filters, updates, cond).prop_map(
            |(dims, cell_order, tile_order, writes, reads, filters, updates, cond)| Case {
                cond,
                dims,
                updates,
                filters,
                cell_order,
                tile_order,
                writes,
                reads,
            },
        )
    })
}

fn schema_of(c: &Case) -> ArraySchema {
    let mut b = ArraySchema::builder(ArrayType::Dense).cell_order(c.cell_order).tile_order(c.tile_order);
    for (i, &(lo, size, tile)) in c.dims.iter().enumerate() {
        b = b.dim(dim(&format!("d{i}"), lo, lo + size as i128 - 1, tile));
    }
    let mut v = Attribute::new("v", Datatype::Int16);
    v.cell_val_num = CellValNum::Var;
    v.nullable = true;
    v.filters = FilterPipeline::new(c.filters.1.clone());
    let mut a = Attribute::new("a", Datatype::Int32);
    a.filters = FilterPipeline::new(c.filters.0.clone());
    b.attr(a).attr(v).build().unwrap()
}

fn cells_in_layout(c: &Case, ranges: &[Vec<(i128, i128)>], layout: Layout) -> Vec<Coord> {
    let dims = c.dims.iter().map(|&(lo, size, t)| (lo, t, size)).collect();
    GridOrder { dims, cell_order: c.cell_order, tile_order: c.tile_order }.cells_in_layout(ranges, layout)
}

fn value_for(seed: u64, k: usize) -> Cell {
    let x = seed.wrapping_mul(6364136223846793005).wrapping_add((k as u64).wrapping_mul(1442695040888963407));
    let len = (x >> 33) % 4;
    let v = if (x >> 40).is_multiple_of(5) { None } else { Some((0..len).map(|j| (x >> (j * 3)) as i16).collect()) };
    Cell { a: (x >> 16) as i32, v }
}

/// Deletes the cells at `pts` (repeated points allowed).
fn apply_delete(ctx: &Context, uri: &str, c: &Case, pts: &[Vec<i128>], model: &mut HashMap<Coord, Cell>) {
    if pts.is_empty() {
        return;
    }
    let cols: Vec<Vec<u8>> =
        (0..c.dims.len()).map(|d| pts.iter().flat_map(|p| (p[d] as i64).to_le_bytes()).collect()).collect();
    let names: Vec<String> = (0..c.dims.len()).map(|d| format!("d{d}")).collect();
    let coords: Vec<CoordInput<'_>> =
        (0..c.dims.len()).map(|d| CoordInput { name: &names[d], data: &cols[d] }).collect();
    Array::open(ctx, uri, Mode::Write).unwrap().delete_cells(&coords).unwrap();
    for p in pts {
        model.remove(p);
    }
}

/// Writes `pts` (duplicates dropped) as a sparse fragment of random updates.
fn apply_update(ctx: &Context, uri: &str, c: &Case, pts: &[Vec<i128>], seed: u64, model: &mut HashMap<Coord, Cell>) {
    let mut seen = std::collections::HashSet::new();
    let pts: Vec<&Vec<i128>> = pts.iter().filter(|p| seen.insert((*p).clone())).collect();
    if pts.is_empty() {
        return;
    }
    let vals: Vec<Cell> = (0..pts.len()).map(|k| value_for(seed, k)).collect();
    let cols: Vec<Vec<u8>> =
        (0..c.dims.len()).map(|d| pts.iter().flat_map(|p| (p[d] as i64).to_le_bytes()).collect()).collect();
    let names: Vec<String> = (0..c.dims.len()).map(|d| format!("d{d}")).collect();
    let coords: Vec<CoordInput<'_>> =
        (0..c.dims.len()).map(|d| CoordInput { name: &names[d], data: &cols[d] }).collect();
    let a: Vec<i32> = vals.iter().map(|x| x.a).collect();
    let (mut data, mut offs, mut valid) = (Vec::new(), Vec::new(), Vec::new());
    for x in &vals {
        offs.push(data.len() as u64);
        valid.push(u8::from(x.v.is_some()));
        for y in x.v.iter().flatten() {
            data.extend_from_slice(&y.to_le_bytes());
        }
    }
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    w.write_sparse(
        &coords,
        &[
            AttrInput::fixed("a", i32_bytes(&a)),
            AttrInput { name: "v", data: &data, offsets: Some(&offs), validity: Some(&valid) },
        ],
    )
    .unwrap();
    for (p, v) in pts.into_iter().zip(vals) {
        model.insert(p.clone(), v);
    }
}

fn run_case(c: &Case, index: bool) -> Result<(), TestCaseError> {
    run_case_with(c, &mem_ctx_indexed(index), "/arr")
}

/// Local files in `mode` with a tile cache of `cache` bytes (see `local_model_ctx`), to show
/// every storage path gives the model's answers.
fn run_case_local(c: &Case, mode: &str, cache: &str, index: bool) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    // The largest tile a read needs: per cell 4 bytes of `a`, an 8-byte offset, at most 3 int16
    // values and a validity byte of `v`.
    let budget = schema_of(c).cells_per_tile() * (4 + 8 + 6 + 1);
    run_case_with(c, &local_model_ctx(mode, cache, index, budget), uri.to_str().unwrap())
}

fn run_case_with(c: &Case, ctx: &Context, uri: &str) -> Result<(), TestCaseError> {
    let ctx = ctx.clone();
    let schema = schema_of(c);
    Array::create(&ctx, uri, &schema).unwrap();
    let mut model: HashMap<Coord, Cell> = HashMap::new();
    for (wi, (rect, layout, seed, submits)) in c.writes.iter().enumerate() {
        if let Some(pts) = c.updates.get(wi) {
            if wi % 3 == 2 {
                apply_delete(&ctx, uri, c, pts, &mut model);
            } else {
                apply_update(&ctx, uri, c, pts, *seed ^ 0x5555, &mut model);
            }
            if wi % 4 == 3 && !pts.is_empty() {
                // Delete the box spanned by the first two points.
                let (a, b) = (&pts[0], pts.get(1).unwrap_or(&pts[0]));
                let rect: Vec<(i128, i128)> = a.iter().zip(b).map(|(x, y)| (*x.min(y), *x.max(y))).collect();
                let w = Array::open(&ctx, uri, Mode::Write).unwrap();
                w.delete_ranges(&rect.iter().map(|&(x, y)| vec![DimRange::Int(x, y)]).collect::<Vec<_>>()).unwrap();
                model.retain(|k, _| !k.iter().zip(&rect).all(|(x, r)| r.0 <= *x && *x <= r.1));
            }
        }
        // Writes with several ranges are only allowed for reads; one range per dimension here.
        let cells = cells_in_layout(c, &rect.iter().map(|&r| vec![r]).collect::<Vec<_>>(), *layout);
        let vals: Vec<Cell> = (0..cells.len()).map(|k| value_for(*seed, k)).collect();
        let w = Array::open(&ctx, uri, Mode::Write).unwrap();
        let mut writer = w.writer(&Subarray::from_ranges(rect), *layout).unwrap();
        let chunks: Vec<(usize, usize)> = if *layout == Layout::Global && *submits > 1 {
            let step = cells.len().div_ceil(*submits).max(1);
            (0..cells.len()).step_by(step).map(|s| (s, (s + step).min(cells.len()))).collect()
        } else {
            vec![(0, cells.len())]
        };
        for (s, e) in chunks {
            let part = &vals[s..e];
            let a: Vec<i32> = part.iter().map(|x| x.a).collect();
            let mut offs = Vec::new();
            let mut data: Vec<u8> = Vec::new();
            let mut valid = Vec::new();
            for x in part {
                offs.push(data.len() as u64);
                valid.push(u8::from(x.v.is_some()));
                for y in x.v.iter().flatten() {
                    data.extend_from_slice(&y.to_le_bytes());
                }
            }
            writer
                .submit(&[
                    AttrInput::fixed("a", i32_bytes(&a)),
                    AttrInput { name: "v", data: &data, offsets: Some(&offs), validity: Some(&valid) },
                ])
                .unwrap();
        }
        writer.finish().unwrap();
        for (coord, v) in cells.into_iter().zip(vals) {
            model.insert(coord, v);
        }
    }
    // Reads before consolidation, after it, and after vacuum must all match the model.
    for phase in 0..3 {
        if phase == 1 {
            consolidate_some(&ctx, uri, c.writes.first().map_or(0, |w| w.2));
        }
        if phase == 2 {
            vacuum(&ctx, uri).unwrap();
        }
        let r = Array::open(&ctx, uri, Mode::Read).unwrap();
        // Every cell of the domain as a point read, in a scrambled order, some twice.
        {
            let all: Vec<Vec<i128>> = cells_in_layout(
                c,
                &c.dims.iter().map(|&(lo, size, _)| vec![(lo, lo + size as i128 - 1)]).collect::<Vec<_>>(),
                Layout::RowMajor,
            );
            let mut order: Vec<usize> = (0..all.len()).collect();
            order.sort_by_key(|&i| (i * 7919) % all.len().max(1));
            // Some points twice: each place of the result gets the cell.
            let again: Vec<usize> = order.iter().step_by(5).copied().collect();
            order.extend(again);
            let pts: Vec<&Vec<i128>> = order.iter().map(|&i| &all[i]).collect();
            let cols: Vec<Vec<u8>> =
                (0..c.dims.len()).map(|d| pts.iter().flat_map(|p| (p[d] as i64).to_le_bytes()).collect()).collect();
            let names: Vec<String> = (0..c.dims.len()).map(|d| format!("d{d}")).collect();
            let coords: Vec<CoordInput<'_>> =
                (0..c.dims.len()).map(|d| CoordInput { name: &names[d], data: &cols[d] }).collect();
            let res = r.read_points(&coords, &["a", "v"]).unwrap();
            let a = as_i32(&res.attrs[0].data);
            let v = &res.attrs[1];
            let (offs, valid) = (v.offsets.as_ref().unwrap(), v.validity.as_ref().unwrap());
            for (k, p) in pts.iter().enumerate() {
                let e = model.get(*p).cloned().unwrap_or(Cell { a: i32::MIN, v: None });
                let end = offs.get(k + 1).copied().unwrap_or(v.data.len() as u64) as usize;
                let vals: Vec<i16> =
                    v.data[offs[k] as usize..end].chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
                prop_assert_eq!(Cell { a: a[k], v: (valid[k] == 1).then_some(vals) }, e, "point {:?}", p);
            }
        }
        // The condition as text, parsed back (the form Python and the CLI give).
        let cond = Condition::parse(&c.cond.to_string()).unwrap();
        prop_assert_eq!(&cond, &c.cond);
        for ((ranges, layout, buf_cells), cond) in c.reads.iter().flat_map(|r| [(r, None), (r, Some(&cond))]) {
            let layout = if ranges.iter().any(|r| r.len() > 1) && *layout == Layout::Global {
                Layout::RowMajor
            } else {
                *layout
            };
            // With a condition, a cell whose merged value fails reads as the fill cell.
            let fill = Cell { a: i32::MIN, v: None };
            let expected: Vec<Cell> = cells_in_layout(c, ranges, layout)
                .iter()
                .map(|k| model.get(k).cloned().unwrap_or(fill.clone()))
                .map(|e| match cond {
                    Some(cd) if !cond_holds(cd, e.a, e.v.is_none()) => fill.clone(),
                    _ => e,
                })
                .collect();
            let sub = Subarray { ranges: ranges.clone() };
            let mut got: Vec<Cell> = Vec::new();
            let push = |got: &mut Vec<Cell>, a: &[u8], data: &[u8], offs: &[u64], valid: &[u8]| {
                let a = as_i32(a);
                for k in 0..a.len() {
                    let end = offs.get(k + 1).copied().unwrap_or(data.len() as u64) as usize;
                    let vals: Vec<i16> =
                        data[offs[k] as usize..end].chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
                    got.push(Cell { a: a[k], v: (valid[k] == 1).then_some(vals) });
                }
            };
            let query = || {
                let q = r.read_query(&sub, &["a", "v"], layout).unwrap();
                match cond {
                    Some(cd) => q.with_condition(cd).unwrap(),
                    None => q,
                }
            };
            if *buf_cells == 0 {
                let res = query().read_all().unwrap();
                let v = &res.attrs[1];
                push(&mut got, &res.attrs[0].data, &v.data, v.offsets.as_ref().unwrap(), v.validity.as_ref().unwrap());
            } else {
                let mut q = query();
                let n = *buf_cells as usize;
                // The fixed-size buffer starts full of garbage: every cell must be written.
                let (mut a, mut d, mut o, mut val) =
                    (vec![0xEEu8; n * 4], vec![0u8; n * 4], vec![0u64; n], vec![0u8; n]);
                let mut rounds = 0;
                loop {
                    let st = {
                        let mut bufs = [
                            AttrBuffer { data: &mut a, offsets: None, validity: None },
                            AttrBuffer { data: &mut d, offsets: Some(&mut o), validity: Some(&mut val) },
                        ];
                        q.submit(&mut bufs).unwrap()
                    };
                    let k = st.cells as usize;
                    if k == 0 && !st.complete {
                        // Values of one cell do not fit: grow the data buffer, as a caller would.
                        d.resize(d.len() * 2 + 8, 0);
                    } else {
                        push(&mut got, &a[..k * 4], &d[..st.data_bytes[1] as usize], &o[..k], &val[..k]);
                    }
                    rounds += 1;
                    prop_assert!(rounds < 10_000);
                    if st.complete {
                        break;
                    }
                }
            }
            prop_assert_eq!(got.len(), expected.len());
            for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
                prop_assert_eq!(
                    g,
                    e,
                    "cell {} of read {:?} {:?} where {:?}",
                    i,
                    ranges,
                    layout,
                    cond.map(|c| c.to_string())
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn reads_match_the_model(c in case_strategy(), index in any::<bool>()) {
        run_case(&c, index)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]
    #[test]
    fn reads_match_the_model_on_local_files(c in case_strategy(), mmap in any::<bool>(), cache in 0..3usize,
                                            index in any::<bool>()) {
        run_case_local(&c, if mmap { "mmap" } else { "pread" }, ["0", "4096", "134217728"][cache], index)?;
    }
}
