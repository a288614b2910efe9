//! Property tests of the mappings, the Table 3 bars of issue 18, and the docs' copies of Table 3
//! and Figures 12 and 13.

use proptest::prelude::*;
use std::collections::HashSet;
use std::path::Path;
use tessera_multimap::{
    box_cells, reproduce, DiskModel, Mapping, MultiMapMapping, NaiveMapping, Table3, DEPTH, FIGURES,
};

/// A small shape (2-4 dims, extents 2..=7) and a valid basic cube for it.
fn shape_and_cube() -> impl Strategy<Value = (Vec<u64>, Vec<u64>)> {
    proptest::collection::vec(2u64..=7, 2..=4).prop_flat_map(|shape| {
        let cube: Vec<_> = shape.iter().map(|&s| 2u64..=s).collect();
        (Just(shape), cube)
    })
}

fn all_cells(shape: &[u64]) -> Vec<Vec<u64>> {
    box_cells(&vec![0; shape.len()], shape)
}

proptest! {
    #[test]
    fn naive_is_a_bijection_onto_a_contiguous_range(shape in proptest::collection::vec(1u64..=7, 1..=4), base in 0u64..10_000) {
        let m = NaiveMapping::new(&shape, base).expect("valid shape");
        let lbns: HashSet<u64> = all_cells(&shape).iter().map(|c| m.lbn(c)).collect();
        let n: u64 = shape.iter().product();
        prop_assert_eq!(lbns.len() as u64, n);
        prop_assert!(lbns.iter().all(|&l| l >= base && l < base + n));
    }

    #[test]
    fn multimap_is_a_bijection((shape, cube) in shape_and_cube(), base_cyl in 0u64..20_000) {
        let disk = DiskModel::default();
        let m = MultiMapMapping::new(&disk, &shape, &cube, DEPTH, base_cyl * disk.surfaces).expect("valid cube");
        let cells = all_cells(&shape);
        let lbns: HashSet<u64> = cells.iter().map(|c| m.lbn(c)).collect();
        prop_assert_eq!(lbns.len(), cells.len());
        prop_assert!(lbns.iter().all(|&l| l < disk.capacity()));
    }

    /// Neighbours inside a basic cube: along Dim_0 the next sector of the same track (sequential,
    /// by angle); along Dim_i the `(K_1···K_{i-1})`-th adjacent block, i.e. `W` degrees ahead on a
    /// track at most `D` tracks further.
    #[test]
    fn multimap_neighbours_are_sequential_or_adjacent((shape, cube) in shape_and_cube()) {
        let disk = DiskModel::default();
        let m = MultiMapMapping::new(&disk, &shape, &cube, DEPTH, 1_000).expect("valid cube");
        let t = disk.sectors_per_track;
        for c in all_cells(&shape) {
            let a = m.lbn(&c);
            let mut step = 1;
            for i in 0..shape.len() {
                let mut nb = c.clone();
                nb[i] += 1;
                if nb[i] < shape[i] && nb[i] % cube[i] != 0 {
                    let b = m.lbn(&nb);
                    if i == 0 {
                        prop_assert_eq!(disk.track(b), disk.track(a));
                        prop_assert_eq!(disk.angle_sectors(b), (disk.angle_sectors(a) + 1) % t);
                    } else {
                        prop_assert_eq!(Some(b), disk.get_adjacent(a, step));
                        let d = disk.track(b) - disk.track(a);
                        prop_assert!((1..=DEPTH).contains(&d), "Dim_{} neighbour {} tracks away", i, d);
                    }
                }
                if i >= 1 {
                    step *= cube[i];
                }
            }
        }
    }
}

/// Rows/columns of Table 3 that do not make the bar, with the error we measure (see
/// docs/multimap.md for why). Column 0 = naive_calc, 1 = multimap_calc (bar 5% vs the paper's
/// calculated column), 2 = naive_sim, 3 = multimap_sim (bar 20% vs its measured column).
const KNOWN_MISSES: &[(usize, &str, usize, f64)] = &[
    // Dim_0 beams: C_init = 8.3 ms spread over one chunk's beam (259 or 530 cells) alone is
    // 0.032 / 0.016 ms per cell; the paper's 0.03 / 0.02 cannot include it.
    (3, "Dim_0 beam", 0, 0.568),
    (3, "Dim_0 beam", 1, 0.568),
    (3, "Dim_0 beam", 2, 0.627),
    // 3-D MultiMap Dim_1 beam: 255 adjacent moves at α plus 2 cube crossings at Seek + RotLat,
    // plus C_init, over 259 cells is 1.58 ms/cell; the paper's 1.5 omits the crossings.
    (3, "Dim_1 beam", 1, 0.053),
    (4, "Dim_0 beam", 0, 0.533),
    (4, "Dim_0 beam", 1, 0.533),
    (4, "Dim_0 beam", 2, 0.468),
    (4, "Dim_0 beam", 3, 0.285),
    // 4-D Naive with T = 686: the paper's 4-D figures fit T = 736 (the Cheetah's outer zone).
    (4, "Dim_1 beam", 0, 0.103),
    (4, "Dim_2 beam", 0, 0.062),
    (4, "Dim_3 beam", 0, 0.062),
    (4, "6^4 cube", 0, 0.069),
    (4, "10^4 cube", 0, 0.067),
    (4, "12^4 cube", 0, 0.067),
    // 4-D MultiMap: the published 1.6-1.9 ms/cell beams are below C_init/32 + α (q-1)/q.
    (4, "Dim_1 beam", 1, 0.104),
    (4, "Dim_3 beam", 1, 0.080),
    (4, "12^4 cube", 1, 0.073),
    // 4-D Naive Dim_2/Dim_3: the paper's "fortunate mapping" on the real disk's zones.
    (4, "Dim_2 beam", 2, 0.718),
    (4, "Dim_3 beam", 2, 0.305),
];

#[test]
fn table3_rows_within_the_bars() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = reproduce(Some(dir.path())).expect("reproduce");
    assert_eq!(table.rows.len(), 13);
    let mut report = Vec::new();
    for r in &table.rows {
        for (col, err) in r.errors().into_iter().enumerate() {
            let bar = if col < 2 { 0.05 } else { 0.20 };
            match KNOWN_MISSES.iter().find(|m| m.0 == r.dims && m.1 == r.query && m.2 == col) {
                Some(&(_, _, _, recorded)) => {
                    assert!(
                        err > bar,
                        "{}-D {} col {col}: now {err:.3}, within the bar; drop it from KNOWN_MISSES",
                        r.dims,
                        r.query
                    );
                    assert!(
                        err <= recorded + 0.005,
                        "{}-D {} col {col}: error {err:.3} grew past the recorded {recorded}",
                        r.dims,
                        r.query
                    );
                }
                None => {
                    if err > bar {
                        report.push(format!(
                            "{}-D {} col {col}: {:.1}% > {:.0}%",
                            r.dims,
                            r.query,
                            err * 100.0,
                            bar * 100.0
                        ));
                    }
                }
            }
        }
    }
    assert!(report.is_empty(), "rows outside the bars: {report:#?}");
    docs_show_what_reproduce_writes(dir.path(), &table);
    // table3.json: a list of rows with the six fields
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("table3.json")).expect("json written"))
            .expect("valid json");
    let rows = json.as_array().expect("a list");
    assert_eq!(rows.len(), 13);
    assert_eq!(rows[4]["query"], "2% cube");
    assert_eq!(rows[4]["dims"], 3);
    assert_eq!(rows[11]["query"], "10^4 cube");
    for r in rows {
        let o = r.as_object().expect("object");
        let mut keys: Vec<_> = o.keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["dims", "multimap_calc", "multimap_sim", "naive_calc", "naive_sim", "query"]);
    }
}

/// The command that rewrites the docs' copies of what `reproduce` writes.
const REGENERATE: &str = "cargo run --release -p tessera-multimap --example reproduce -- --out DIR";

/// docs/multimap.md shows this very table and docs/multimap/ holds these very figures, as
/// written to `dir`.
fn docs_show_what_reproduce_writes(dir: &Path, table: &Table3) {
    let docs_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let docs = std::fs::read_to_string(docs_dir.join("multimap.md")).expect("docs/multimap.md");
    assert!(
        docs.contains(&table.to_markdown()),
        "docs/multimap.md's Table 3 is stale: run `{REGENERATE}` and paste DIR/table3.md into it"
    );
    assert_eq!(std::fs::read_to_string(dir.join("table3.md")).expect("table3.md written"), table.to_markdown());
    for (name, _, _) in FIGURES {
        let file = format!("{name}.svg");
        let written = std::fs::read_to_string(dir.join(&file)).expect("figure written");
        let committed = std::fs::read_to_string(docs_dir.join("multimap").join(&file)).unwrap_or_default();
        assert!(
            committed == written,
            "docs/multimap/{file} is stale: run `{REGENERATE}` and copy DIR/figure*.svg into docs/multimap/"
        );
        assert!(docs.contains(&format!("](multimap/{file})")), "docs/multimap.md does not show {file}");
    }
}
