//! Model-based property test of sparse arrays: random schemas (integer or float dimensions,
//! tilings, every cell and tile order (row-major, col-major, Z, Hilbert), capacities, duplicates allowed or not, filters), random
//! writes (unordered, or in global order over several submits), random reads in every layout,
//! compared with a reference model: a list of (coordinates, value, write number).

use proptest::prelude::*;
use tessera::*;

use crate::common::*;

/// Consolidates a consecutive run of fragments chosen by `pick` (or all of them), with a
/// buffer of a few cells (so the global order is cut into many bands, `consolidate/bands.rs`)
/// or the default one.
fn consolidate_some(ctx: &Context, uri: &str, pick: u64) {
    let mut config = ctx.config().clone();
    let buffer = [1u64, 100, 300, 1000, 256 << 20][(pick / 7) as usize % 5];
    config.set("sm.consolidation.buffer_size", &buffer.to_string()).unwrap();
    let ctx = &Context::with_storage(config, ctx.storage().clone()).unwrap();
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

#[derive(Debug, Clone)]
struct Case {
    float: bool,
    dims: Vec<(i64, u64, Option<u64>)>, // lo, size, tile
    cell_order: CellOrder,
    tile_order: CellOrder,
    capacity: u64,
    dups: bool,
    filters: Vec<Filter>,
    writes: Vec<(Vec<Vec<u64>>, bool, usize)>, // points (offsets from lo), global order?, submits
    reads: Vec<(Vec<Vec<(u64, u64)>>, Layout)>,
    /// Every read is repeated with this condition (only the cells that pass come back).
    cond: Condition,
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let dims = prop::collection::vec(
        (-5i64..5, 1u64..12).prop_flat_map(|(lo, size)| (Just(lo), Just(size), prop::option::of(1..=size))),
        1..4,
    );
    let (order, torder) = (order_strategy(), order_strategy());
    let filters = prop::collection::vec(
        prop_oneof![Just(Filter::Delta), Just(Filter::Zstd { level: 1 }), Just(Filter::Rle), Just(Filter::ByteShuffle)],
        0..3,
    );
    (any::<bool>(), dims, order, torder, 1u64..7, any::<bool>(), filters).prop_flat_map(
        |(float, dims, cell_order, tile_order, capacity, dups, filters)| {
            let point = dims.iter().map(|&(_, size, _)| 0..size).collect::<Vec<_>>();
            let writes = prop::collection::vec((prop::collection::vec(point, 1..25), any::<bool>(), 1usize..4), 1..5);
            let ranges = dims
                .iter()
                .map(|&(_, size, _)| {
                    prop::collection::vec((0..size, 0..size).prop_map(|(a, b)| (a.min(b), a.max(b))), 0..3)
                })
                .collect::<Vec<_>>();
            let layout = prop_oneof![
                Just(Layout::Global),
                Just(Layout::RowMajor),
                Just(Layout::ColMajor),
                Just(Layout::Unordered)
            ];
            let reads = prop::collection::vec((ranges, layout), 1..4);
            let cond = cond_strategy(-10, 5100);
            (Just((float, dims, cell_order, tile_order, capacity, dups, filters)), writes, reads, cond).prop_map(
                |((float, dims, cell_order, tile_order, capacity, dups, filters), writes, reads, cond)| Case {
                    cond,
                    float,
                    dims,
                    cell_order,
                    tile_order,
                    capacity,
                    dups,
                    filters,
                    writes,
                    reads,
                },
            )
        },
    )
}

/// Coordinates of a point as f64 (float dims use steps of 0.5 from lo).
fn coord(c: &Case, d: usize, off: u64) -> f64 {
    let (lo, _, _) = c.dims[d];
    if c.float {
        lo as f64 + off as f64 * 0.5
    } else {
        (lo + off as i64) as f64
    }
}

fn schema_of(c: &Case) -> ArraySchema {
    let mut b = ArraySchema::builder(ArrayType::Sparse)
        .cell_order(c.cell_order)
        .tile_order(c.tile_order)
        .capacity(c.capacity)
        .allows_duplicates(c.dups);
    for (i, &(lo, size, tile)) in c.dims.iter().enumerate() {
        let name = format!("d{i}");
        let d = if c.float {
            let hi = lo as f64 + (size - 1) as f64 * 0.5;
            Dimension::float(name, Datatype::Float64, (lo as f64, hi), tile.map(|t| t as f64 * 0.5))
        } else {
            let mut d =
                Dimension::new(name, Datatype::Int64, (lo.into(), (lo + size as i64 - 1).into()), tile.unwrap_or(size));
            if tile.is_none() {
                d.tile = None;
            }
            d
        };
        b = b.dim(d.with_filters(FilterPipeline::new(c.filters.clone())));
    }
    let mut v = Attribute::new("v", Datatype::Int16);
    v.cell_val_num = CellValNum::Var;
    v.nullable = true;
    v.filters = FilterPipeline::new(c.filters.clone());
    b.attr(Attribute::new("a", Datatype::Int32)).attr(v).build().unwrap()
}

/// Reference global order (docs/format.md §10): the tile part (tile coordinates in tile order,
/// or their curve key), then the cell part (coordinates in cell order, or the curve key of the
/// cell's place in its tile followed by the coordinates).
fn global_key(c: &Case, p: &[u64]) -> Vec<u128> {
    let n = p.len();
    let mut tiles = vec![0u64; n];
    let (mut counts, mut inside, mut widths) = (vec![1u64; n], vec![0u64; n], vec![0u32; n]);
    for d in 0..n {
        let (lo, size, tile) = c.dims[d];
        if c.float {
            // The engine's float arithmetic, step for step.
            let (dlo, x) = (lo as f64, lo as f64 + p[d] as f64 * 0.5);
            let width = tile.map_or((size - 1) as f64 * 0.5, |t| t as f64 * 0.5);
            if let Some(w) = tile.map(|t| t as f64 * 0.5) {
                counts[d] = ((size - 1) as f64 * 0.5 / w).floor() as u64 + 1;
                tiles[d] = (((x - dlo) / w).floor().max(0.0) as u64).min(counts[d] - 1);
            }
            let tlo = dlo + tiles[d] as f64 * width;
            let f = if width > 0.0 { (x - tlo) / width } else { 0.0 };
            let top = (1u64 << 32) as f64;
            inside[d] = (f * top).floor().clamp(0.0, top - 1.0) as u64;
            widths[d] = 32;
        } else {
            let t = tile.unwrap_or(size);
            (tiles[d], counts[d], inside[d], widths[d]) = (p[d] / t, size.div_ceil(t), p[d] % t, bit_width(t));
        }
    }
    let tile_widths: Vec<u32> = counts.iter().map(|&k| bit_width(k)).collect();
    let mut k: Vec<u128> = match c.tile_order {
        CellOrder::ColMajor => tiles.iter().rev().map(|&t| u128::from(t)).collect(),
        CellOrder::RowMajor => tiles.iter().map(|&t| u128::from(t)).collect(),
        o => vec![curve_key(o, &tile_widths, &tiles).expect("tile key")],
    };
    match c.cell_order {
        CellOrder::ColMajor => k.extend(p.iter().rev().map(|&x| u128::from(x))),
        CellOrder::RowMajor => k.extend(p.iter().map(|&x| u128::from(x))),
        o => {
            k.push(curve_key(o, &widths, &inside).expect("cell key"));
            k.extend(p.iter().map(|&x| u128::from(x)));
        }
    }
    k
}

type Row = (Vec<u64>, i32, Option<Vec<i16>>);

fn value(w: usize, k: usize) -> (i32, Option<Vec<i16>>) {
    let a = (w * 1000 + k) as i32;
    let v = if k % 4 == 3 { None } else { Some((0..k % 3).map(|j| (w * 10 + j) as i16).collect()) };
    (a, v)
}

fn encode_coords(c: &Case, pts: &[Vec<u64>], d: usize) -> Vec<u8> {
    pts.iter()
        .flat_map(|p| {
            let x = coord(c, d, p[d]);
            if c.float {
                x.to_le_bytes().to_vec()
            } else {
                (x as i64).to_le_bytes().to_vec()
            }
        })
        .collect()
}

fn run(c: &Case, index: bool) -> Result<(), TestCaseError> {
    run_with(c, &mem_ctx_indexed(index), "/s")
}

/// Local files in `mode` with a tile cache of `cache` bytes (see `local_model_ctx`), to show
/// every storage path gives the model's answers.
fn run_local(c: &Case, mode: &str, cache: &str, index: bool) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    run_with(c, &local_model_ctx(mode, cache, index, 300), uri.to_str().unwrap())
}

fn run_with(c: &Case, ctx: &Context, uri: &str) -> Result<(), TestCaseError> {
    let ctx = ctx.clone();
    let schema = schema_of(c);
    Array::create(&ctx, uri, &schema).unwrap();
    let nd = c.dims.len();
    let mut model: Vec<Row> = Vec::new();
    for (w, (pts, global, submits)) in c.writes.iter().enumerate() {
        let mut pts = pts.clone();
        if !c.dups {
            let mut seen = std::collections::HashSet::new();
            pts.retain(|p| seen.insert(p.clone()));
        }
        let global = *global;
        if global {
            pts.sort_by_key(|p| global_key(c, p));
        }
        let vals: Vec<(i32, Option<Vec<i16>>)> = (0..pts.len()).map(|k| value(w, k)).collect();
        let arr = Array::open(&ctx, uri, Mode::Write).unwrap();
        let mut wr = arr.sparse_writer(if global { Layout::Global } else { Layout::Unordered }).unwrap();
        let step = if global { pts.len().div_ceil(*submits).max(1) } else { pts.len().max(1) };
        for s in (0..pts.len()).step_by(step) {
            let e = (s + step).min(pts.len());
            let cols: Vec<Vec<u8>> = (0..nd).map(|d| encode_coords(c, &pts[s..e], d)).collect();
            let names: Vec<String> = (0..nd).map(|d| format!("d{d}")).collect();
            let coords: Vec<CoordInput<'_>> = (0..nd).map(|d| CoordInput { name: &names[d], data: &cols[d] }).collect();
            let a: Vec<i32> = vals[s..e].iter().map(|v| v.0).collect();
            let (mut data, mut offs, mut valid) = (Vec::new(), Vec::new(), Vec::new());
            for v in &vals[s..e] {
                offs.push(data.len() as u64);
                valid.push(u8::from(v.1.is_some()));
                for x in v.1.iter().flatten() {
                    data.extend_from_slice(&x.to_le_bytes());
                }
            }
            wr.submit(
                &coords,
                &[
                    AttrInput::fixed("a", i32_bytes(&a)),
                    AttrInput { name: "v", data: &data, offsets: Some(&offs), validity: Some(&valid) },
                ],
            )
            .unwrap();
        }
        wr.finish().unwrap();
        let pts_kept = pts.clone();
        for (p, v) in pts.into_iter().zip(vals) {
            if !c.dups {
                model.retain(|r| r.0 != p);
            }
            model.push((p, v.0, v.1));
        }
        if w % 2 == 1 {
            // Deletions: every third point of this write, and the box of the first point's
            // coordinates grown by one cell.
            let gone: Vec<Vec<u64>> = pts_kept.iter().step_by(3).cloned().collect();
            let arr = Array::open(&ctx, uri, Mode::Write).unwrap();
            let cols: Vec<Vec<u8>> = (0..nd).map(|d| encode_coords(c, &gone, d)).collect();
            let names: Vec<String> = (0..nd).map(|d| format!("d{d}")).collect();
            let coords: Vec<CoordInput<'_>> = (0..nd).map(|d| CoordInput { name: &names[d], data: &cols[d] }).collect();
            arr.delete_cells(&coords).unwrap();
            model.retain(|r| !gone.contains(&r.0));
            let first = &pts_kept[0];
            let rect: Vec<(u64, u64)> = first
                .iter()
                .zip(&c.dims)
                .map(|(&x, &(_, size, _))| (x.saturating_sub(1), (x + 1).min(size - 1)))
                .collect();
            let ranges: Vec<Vec<DimRange>> = rect
                .iter()
                .enumerate()
                .map(|(d, &(a, b))| {
                    vec![if c.float {
                        DimRange::Float(coord(c, d, a), coord(c, d, b))
                    } else {
                        DimRange::Int(coord(c, d, a) as i128, coord(c, d, b) as i128)
                    }]
                })
                .collect();
            arr.delete_ranges(&ranges).unwrap();
            model.retain(|r| !r.0.iter().zip(&rect).all(|(x, (a, b))| a <= x && x <= b));
        }
    }
    // Reads before consolidation, after it, and after vacuum must all match the model.
    for phase in 0..3 {
        if phase == 1 {
            consolidate_some(&ctx, uri, c.writes.iter().map(|w| w.0.len() as u64 * 31 + w.2 as u64).sum::<u64>());
        }
        if phase == 2 {
            vacuum(&ctx, uri).unwrap();
        }
        let r = Array::open(&ctx, uri, Mode::Read).unwrap();
        // The condition as text, parsed back (the form Python and the CLI give).
        let cond = Condition::parse(&c.cond.to_string()).unwrap();
        prop_assert_eq!(&cond, &c.cond);
        for ((ranges, layout), cond) in c.reads.iter().flat_map(|r| [(r, None), (r, Some(&cond))]) {
            let q: Vec<Vec<DimRange>> = ranges
                .iter()
                .enumerate()
                .map(|(d, rs)| {
                    rs.iter()
                        .map(|&(a, b)| {
                            if c.float {
                                DimRange::Float(coord(c, d, a), coord(c, d, b))
                            } else {
                                DimRange::Int(coord(c, d, a) as i128, coord(c, d, b) as i128)
                            }
                        })
                        .collect()
                })
                .collect();
            let mut expect: Vec<Row> = model
                .iter()
                .filter(|row| {
                    ranges.iter().zip(&row.0).all(|(rs, &x)| rs.is_empty() || rs.iter().any(|&(a, b)| a <= x && x <= b))
                })
                .filter(|row| cond.is_none_or(|cd| cond_holds(cd, row.1, row.2.is_none())))
                .cloned()
                .collect();
            let mut query = match cond {
                Some(cd) => r.sparse_query_where(&q, &[], *layout, cd).unwrap(),
                None => r.sparse_query(&q, &[], *layout).unwrap(),
            };
            let res = query.read_all().unwrap();
            prop_assert_eq!(res.cells as usize, expect.len());
            let cols: Vec<Vec<u64>> = (0..nd)
                .map(|d| {
                    res.attrs[d]
                        .data
                        .chunks_exact(8)
                        .map(|b| {
                            let x = if c.float {
                                f64::from_le_bytes(b.try_into().unwrap())
                            } else {
                                i64::from_le_bytes(b.try_into().unwrap()) as f64
                            };
                            let lo = c.dims[d].0 as f64;
                            (if c.float { (x - lo) / 0.5 } else { x - lo }) as u64
                        })
                        .collect()
                })
                .collect();
            let a = as_i32(&res.attrs[nd].data);
            let vv = &res.attrs[nd + 1];
            let offs = vv.offsets.as_ref().unwrap();
            let valid = vv.validity.as_ref().unwrap();
            let mut got: Vec<Row> = (0..a.len())
                .map(|k| {
                    let end = offs.get(k + 1).copied().unwrap_or(vv.data.len() as u64) as usize;
                    let v: Vec<i16> = vv.data[offs[k] as usize..end]
                        .chunks_exact(2)
                        .map(|b| i16::from_le_bytes([b[0], b[1]]))
                        .collect();
                    ((0..nd).map(|d| cols[d][k]).collect(), a[k], (valid[k] == 1).then_some(v))
                })
                .collect();
            // Order checks where the layout fixes an order of distinct coordinates.
            let key_of = |p: &Vec<u64>| -> Vec<u128> {
                match layout {
                    Layout::RowMajor => p.iter().map(|&x| u128::from(x)).collect(),
                    Layout::ColMajor => p.iter().rev().map(|&x| u128::from(x)).collect(),
                    _ => global_key(c, p),
                }
            };
            if *layout != Layout::Unordered {
                for w in got.windows(2) {
                    prop_assert!(
                        key_of(&w[0].0) <= key_of(&w[1].0),
                        "order {:?}: {:?} then {:?}",
                        layout,
                        w[0].0,
                        w[1].0
                    );
                }
            }
            got.sort_by(|x, y| (&x.0, x.1).cmp(&(&y.0, y.1)));
            expect.sort_by(|x, y| (&x.0, x.1).cmp(&(&y.0, y.1)));
            prop_assert_eq!(got, expect);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn sparse_reads_match_the_model(c in case_strategy(), index in any::<bool>()) {
        run(&c, index)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]
    #[test]
    fn sparse_reads_match_the_model_on_local_files(c in case_strategy(), mmap in any::<bool>(), cache in 0..3usize,
                                                   index in any::<bool>()) {
        run_local(&c, if mmap { "mmap" } else { "pread" }, ["0", "4096", "134217728"][cache], index)?;
    }
}
