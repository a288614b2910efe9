//! Cooking: hand-worked Moore traces, the drop rule at its limits, edges, and random images
//! against the BFS reference; chunked (parallel) cooking against the sequential pass.

use proptest::prelude::*;

use super::reference;
use crate::*;

const TH: i32 = 1000;

/// An image of `w` x `h` cells: `cells` (x, y) get `v`, the others 0.
fn image(w: usize, h: usize, cells: &[(usize, usize)], v: i32) -> Vec<i32> {
    let mut pix = vec![0; w * h];
    for &(x, y) in cells {
        pix[y * w + x] = v;
    }
    pix
}

fn cook(pix: &[i32], w: usize, h: usize, d1: u32, d2: u32) -> Vec<Observation> {
    cook_image(pix, w, h, (0, 0), 0, CookParams { th: TH, d1, d2 }).unwrap()
}

fn poly(o: &Observation) -> Vec<(i32, i32)> {
    o.polygon.iter().map(|p| (p[0], p[1])).collect()
}

#[test]
fn moore_trace_hand_worked_shapes() {
    // (cells, expected B), worked by hand from SSDB.md §2 (see docs/ssdb.md, "Cooking").
    type Case = (Vec<(usize, usize)>, Vec<(i32, i32)>);
    let cases: Vec<Case> = vec![
        (vec![(2, 2)], vec![(2, 2)]),
        (vec![(1, 1), (2, 1), (3, 1)], vec![(1, 1), (2, 1), (3, 1), (2, 1)]),
        (vec![(1, 1), (1, 2), (1, 3)], vec![(1, 1), (1, 2), (1, 3), (1, 2)]),
        (vec![(1, 1), (1, 2), (2, 2)], vec![(1, 1), (2, 2), (1, 2)]),
        (vec![(1, 1), (2, 1), (1, 2)], vec![(1, 1), (2, 1), (1, 2)]),
        (vec![(1, 1), (2, 1), (1, 2), (2, 2)], vec![(1, 1), (2, 1), (2, 2), (1, 2)]),
        (vec![(1, 1), (2, 1), (3, 1), (1, 2)], vec![(1, 1), (2, 1), (3, 1), (2, 1), (1, 2)]),
        // s0 joins two lobes: the trace passes s0 once with another next step (listed again),
        // and stops when it reaches s0 to repeat the first step.
        (vec![(1, 1), (2, 0), (2, 2)], vec![(1, 1), (2, 0), (1, 1), (2, 2)]),
        // A diagonal: the start is the leftmost cell, the trace goes down and comes back.
        (vec![(3, 1), (2, 2), (1, 3)], vec![(1, 3), (2, 2), (3, 1), (2, 2)]),
    ];
    for (cells, want) in cases {
        let pix = image(6, 6, &cells, 2000);
        let obs = cook(&pix, 6, 6, 100, 100);
        assert_eq!(obs.len(), 1, "{cells:?}");
        assert_eq!(poly(&obs[0]), want, "{cells:?}");
    }
}

#[test]
fn a_hole_is_not_traced_and_an_object_inside_it_is_its_own() {
    // A 5 x 5 ring with one cell in the middle of its hole: two objects with the same centre.
    let mut cells = Vec::new();
    for i in 0..5 {
        cells.extend([(i, 0), (i, 4), (0, i), (4, i)]);
    }
    cells.sort_unstable();
    cells.dedup();
    cells.push((2, 2));
    let pix = image(5, 5, &cells, 1500);
    let obs = cook(&pix, 5, 5, 100, 100);
    assert_eq!(obs.len(), 2);
    let ring = &obs[0];
    let want: Vec<(i32, i32)> = [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (4, 1), (4, 2), (4, 3), (4, 4)]
        .into_iter()
        .chain([(3, 4), (2, 4), (1, 4), (0, 4), (0, 3), (0, 2), (0, 1)])
        .collect();
    assert_eq!(poly(ring), want);
    assert_eq!((ring.cx, ring.cy, ring.pixel_sum, ring.bbox), (2, 2, 16 * 1500, [0, 0, 4, 4]));
    assert_eq!((obs[1].cx, obs[1].cy, obs[1].pixel_sum, poly(&obs[1])), (2, 2, 1500, vec![(2, 2)]));
    // Same centre, different keys: the pixel sums tell them apart.
    assert_ne!(ring.key(), obs[1].key());
}

#[test]
fn drop_rule_at_exactly_d2_and_d2_plus_one_vertices_and_at_d1() {
    // 5 vertices (hand-worked above): kept at D2 = 5, dropped at D2 = 4.
    let pix = image(5, 4, &[(1, 1), (2, 1), (3, 1), (1, 2)], 1000);
    assert_eq!(cook(&pix, 5, 4, 10, 5).len(), 1);
    assert_eq!(cook(&pix, 5, 4, 10, 4).len(), 0);
    // A line of 3: 4 vertices; kept at D2 = 4, dropped at D2 = 3.
    let line = image(5, 3, &[(1, 1), (2, 1), (3, 1)], 1000);
    assert_eq!(cook(&line, 5, 3, 10, 4).len(), 1);
    assert_eq!(cook(&line, 5, 3, 10, 3).len(), 0);
    // Box width 3: kept at D1 = 3, dropped at D1 = 2 (vertices allowed).
    assert_eq!(cook(&line, 5, 3, 3, 100).len(), 1);
    assert_eq!(cook(&line, 5, 3, 2, 100).len(), 0);
    // The threshold is inclusive: 999 does not qualify, 1000 does.
    let pix = image(3, 3, &[(1, 1)], 999);
    assert!(cook(&pix, 3, 3, 10, 10).is_empty());
}

#[test]
fn objects_on_every_edge_and_open_at_the_last_row() {
    // One object fills the first column, one the last row's right part and the last column, one
    // is a corner cell, one touches the first row.
    let w = 7;
    let h = 4;
    let cells = [(0, 0), (0, 1), (0, 2), (0, 3), (3, 3), (4, 3), (5, 3), (6, 3), (6, 2), (6, 0), (3, 0)];
    let mut pix = image(w, h, &cells, 1200);
    pix[3 * w + 4] = 65535;
    let obs = cook_image(&pix, w, h, (100, 200), 41, CookParams::f1(50, 50)).unwrap();
    let want = reference::cook(&pix, w, h, TH, 50, 50);
    assert_eq!(obs.len(), want.len());
    assert_eq!(obs.len(), 4);
    for (o, r) in obs.iter().zip(&want) {
        assert_eq!((o.t, o.cycle), (41, 2));
        assert_eq!(i64::from(o.cx), r.cx + 100);
        assert_eq!(i64::from(o.cy), r.cy + 200);
        assert_eq!(o.pixel_sum, r.pixel_sum);
    }
    // The object open at the last row (and on the last column) is whole.
    let last = obs.iter().find(|o| o.bbox == [103, 202, 106, 203]).unwrap();
    assert_eq!(last.pixel_sum, 4 * 1200 + 65535);
    assert_eq!(poly(last), vec![(103, 203), (104, 203), (105, 203), (106, 202), (106, 203), (105, 203), (104, 203)]);
}

#[test]
fn a_whole_image_object_and_an_empty_image() {
    let pix = vec![5000; 6 * 4];
    let obs = cook(&pix, 6, 4, 6, 100);
    assert_eq!(obs.len(), 1);
    assert_eq!(obs[0].polygon.len(), 2 * 6 + 2 * 4 - 4);
    assert!(cook(&[0; 12], 4, 3, 10, 10).is_empty());
    assert!(cook(&[], 0, 0, 10, 10).is_empty());
}

#[test]
fn bad_input_is_refused() {
    let p = CookParams::f1(50, 50);
    assert!(matches!(cook_image(&[0; 5], 2, 3, (0, 0), 0, p), Err(CookError::BufferSize { got: 5, expected: 6, .. })));
    let zero = CookParams { th: 0, ..p };
    assert!(matches!(cook_image(&[0; 6], 2, 3, (0, 0), 0, zero), Err(CookError::Threshold { th: 0 })));
    assert!(matches!(cook_image(&[0; 6], 2, 3, (i64::from(i32::MAX), 0), 0, p), Err(CookError::ImageTooLarge { .. })));
    assert!(matches!(cook_image_chunked(&[0; 6], 2, 3, (0, 0), 0, p, 0), Err(CookError::EmptyChunk)));
}

/// A random image: objects of random shapes, pix values around the threshold.
fn image_strategy() -> impl Strategy<Value = (usize, usize, Vec<i32>)> {
    (1usize..26, 1usize..26, 0u32..100).prop_flat_map(|(w, h, density)| {
        let cell = prop_oneof![
            (100 - density) => Just(0),
            density => prop_oneof![Just(TH - 1), Just(TH), 1000i32..4000, Just(65535)],
        ];
        (Just(w), Just(h), prop::collection::vec(cell, w * h))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn cooking_equals_the_bfs_reference(
        (w, h, pix) in image_strategy(),
        d1 in 1u32..30,
        d2 in 1u32..60,
        origin in (0i64..1_000_000, 0i64..1_000_000),
    ) {
        let got = cook_image(&pix, w, h, origin, 7, CookParams { th: TH, d1, d2 }).unwrap();
        let want = reference::cook(&pix, w, h, TH, d1, d2);
        prop_assert_eq!(got.len(), want.len());
        for (o, r) in got.iter().zip(&want) {
            prop_assert_eq!(i64::from(o.cx), r.cx + origin.0);
            prop_assert_eq!(i64::from(o.cy), r.cy + origin.1);
            prop_assert_eq!(o.pixel_sum, r.pixel_sum);
            let bbox = [r.bbox[0] + origin.0, r.bbox[1] + origin.1, r.bbox[2] + origin.0, r.bbox[3] + origin.1];
            prop_assert_eq!(o.bbox.map(i64::from), bbox);
            let poly: Vec<(i64, i64)> = o.polygon.iter().map(|p| (i64::from(p[0]) - origin.0, i64::from(p[1]) - origin.1)).collect();
            prop_assert_eq!(&poly, &r.polygon);
            prop_assert!((o.avg_dist - r.avg_dist).abs() <= 1e-12 * r.avg_dist.abs().max(1e-300), "{} {}", o.avg_dist, r.avg_dist);
        }
        // Every component's trace (no drop rule) equals the reference's too.
        for r in reference::components(&pix, w, h, TH) {
            let start = r.cells.iter().map(|&(x, y)| (x as u32, y as u32)).min().unwrap();
            let b = trace_object(&pix, w, TH, start, usize::MAX).unwrap();
            let b: Vec<(i64, i64)> = b.iter().map(|&(x, y)| (i64::from(x), i64::from(y))).collect();
            prop_assert_eq!(b, r.polygon);
        }
    }

    #[test]
    fn chunked_cooking_equals_the_sequential_pass(
        (w, h, pix) in image_strategy(),
        d1 in 1u32..12,
        d2 in 1u32..40,
        core in 1usize..8,
    ) {
        let p = CookParams { th: TH, d1, d2 };
        let seq = cook_image(&pix, w, h, (10, 20), 3, p).unwrap();
        let par = cook_image_chunked(&pix, w, h, (10, 20), 3, p, core).unwrap();
        prop_assert_eq!(par, seq.clone());
        prop_assert_eq!(cook_image_parallel(&pix, w, h, (10, 20), 3, p).unwrap(), seq);
    }
}

/// Objects straddling chunk edges at every offset, with a tall object cut by the overlap.
#[test]
fn chunk_edges_with_tall_and_wide_objects() {
    let (w, h) = (40, 60);
    let mut pix = vec![0; w * h];
    // Vertical bars of heights 1..=12 starting at every row offset, and blobs.
    for (i, x) in (0..w).step_by(3).enumerate() {
        let len = 1 + i % 12;
        let y0 = (i * 7) % (h - len);
        for y in y0..y0 + len {
            pix[y * w + x] = 1000 + (y * 37 % 500) as i32;
            if i % 2 == 0 && x + 1 < w {
                pix[y * w + x + 1] = 1500;
            }
        }
    }
    for d1 in [1u32, 3, 5, 8, 12, 13] {
        let p = CookParams { th: TH, d1, d2: 3 * d1 };
        let seq = cook_image(&pix, w, h, (0, 0), 0, p).unwrap();
        for core in 1..=h {
            assert_eq!(cook_image_chunked(&pix, w, h, (0, 0), 0, p, core).unwrap(), seq, "d1 {d1} core {core}");
        }
    }
}

#[test]
fn trace_object_refuses_a_start_outside_any_object() {
    let pix = image(4, 4, &[(1, 1), (2, 1)], 2000);
    assert_eq!(trace_object(&pix, 4, TH, (0, 0), usize::MAX), None);
    assert_eq!(trace_object(&pix, 4, TH, (9, 9), usize::MAX), None);
    assert_eq!(trace_object(&pix, 4, TH, (1, 1), usize::MAX), Some(vec![(1, 1), (2, 1)]));
    // Not the leftmost cell: the trace stops (at the latest when the states run out) instead of
    // looping.
    let ring: Vec<(usize, usize)> = (0..5).flat_map(|i| [(i, 0), (i, 4), (0, i), (4, i)]).collect();
    let pix = image(5, 5, &ring, 2000);
    assert!(trace_object(&pix, 5, TH, (4, 2), usize::MAX).is_some());
}

/// The canonical sky tiles (SSDB.md §1) cooked against the BFS reference, with F1 and F1' and
/// the medium drop rule, at 3 origins and chunk sizes. Needs the `tileData` file: run with
/// `SSDB_TILEDATA=path/to/tileData cargo test --release -p tessera-ssdb -- --ignored sky`.
#[test]
#[ignore = "needs the 20 MB tileData file (SSDB_TILEDATA)"]
fn sky_tiles_equal_the_reference() {
    let path = std::env::var("SSDB_TILEDATA").expect("set SSDB_TILEDATA to the tileData file");
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(sha256_hex(&bytes), "d08dc7e4ba3b54db649bd97476ad4509ee36d6de212e757fede37ce2ece67090");
    let side = 1000;
    for k in 0..10 {
        let at = 16 + 2 * side * side * k;
        let pix: Vec<i32> = bytes[at..at + 2 * side * side]
            .chunks_exact(2)
            .map(|b| i32::from(u16::from_le_bytes([b[0], b[1]])))
            .collect();
        for th in [TH_F1, TH_F1_PRIME] {
            let want = reference::cook(&pix, side, side, th, 50, 50);
            assert!(want.len() > 300, "tile {k}: {} objects, the calibration says ~410", want.len());
            let p = CookParams { th, d1: 50, d2: 50 };
            let origin = (500_000 + 37 * k as i64, 499_000);
            for got in [
                cook_image(&pix, side, side, origin, 3, p).unwrap(),
                cook_image_chunked(&pix, side, side, origin, 3, p, 1 + 97 * k).unwrap(),
                cook_image_parallel(&pix, side, side, origin, 3, p).unwrap(),
            ] {
                assert_eq!(got.len(), want.len(), "tile {k} th {th}");
                for (o, r) in got.iter().zip(&want) {
                    assert_eq!((i64::from(o.cx), i64::from(o.cy)), (r.cx + origin.0, r.cy + origin.1));
                    assert_eq!(o.pixel_sum, r.pixel_sum);
                    let poly: Vec<(i64, i64)> =
                        o.polygon.iter().map(|p| (i64::from(p[0]) - origin.0, i64::from(p[1]) - origin.1)).collect();
                    assert_eq!(poly, r.polygon);
                    assert!((o.avg_dist - r.avg_dist).abs() <= 1e-12 * r.avg_dist);
                }
            }
        }
    }
}
