//! The experiments of the paper's Table 3 (MULTIMAP.md §5) on the modelled disk: beam queries
//! along every dimension (per-cell ms) and cube queries (total ms) on the 3-D and 4-D datasets,
//! by the analytic model ([`crate::cost`]) and by the simulator ([`crate::sim`]), side by side
//! with the paper's figures; and the paper's Figures 12 and 13 drawn from them ([`crate::plot`]).

use crate::cost::CostParams;
use crate::disk::DiskModel;
use crate::mapping::{Mapping, MultiMapMapping, NaiveMapping};
use crate::plot::{format_value, Bar, BarChart, Group, Scale, Series};
use crate::sim::Simulator;
use anyhow::{ensure, Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Adjacency depth `D` used by the experiments (30° conservatism).
pub const DEPTH: u64 = 128;
/// Runs averaged per simulated query (the paper's 15 runs per point).
pub const RUNS: u64 = 15;
/// Seed of the query positions.
pub const SEED: u64 = 0x6d75_6c74_696d_6170;

/// One query of Table 3.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuerySpec {
    /// The row's name as MULTIMAP.md §5 spells it.
    pub name: String,
    /// Extent `q_i` along each dimension.
    pub extent: Vec<u64>,
    /// Beams report ms per cell, cubes total ms.
    pub per_cell: bool,
}

/// One dataset of Table 3 and its queries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Experiment {
    /// Number of dimensions.
    pub dims: usize,
    /// Per-disk chunk `S` the queries run on.
    pub shape: Vec<u64>,
    /// MultiMap basic cube `K`.
    pub cube: Vec<u64>,
    /// The queries, in Table 3's order.
    pub queries: Vec<QuerySpec>,
}

fn beams(shape: &[u64]) -> Vec<QuerySpec> {
    (0..shape.len())
        .map(|d| QuerySpec {
            name: format!("Dim_{d} beam"),
            extent: (0..shape.len()).map(|i| if i == d { shape[i] } else { 1 }).collect(),
            per_cell: true,
        })
        .collect()
}

/// The 3-D experiment: chunks of 259³ of a 1024³ dataset, `K = 259 x 128 x 259`, beams over a
/// whole chunk and p%-edge cubes, `q = floor(p/100 · 1024)` = 10, 20, 30.
pub fn experiment_3d() -> Experiment {
    let shape = vec![259, 259, 259];
    let mut queries = beams(&shape);
    for p in [1u64, 2, 3] {
        let q = p * 1024 / 100;
        queries.push(QuerySpec { name: format!("{p}% cube"), extent: vec![q; 3], per_cell: false });
    }
    Experiment { dims: 3, shape, cube: vec![259, 128, 259], queries }
}

/// The 4-D experiment: chunks of 530 x 32³ (time as Dim_0). `32 · 32 > D`, so the basic cube is
/// `530 x 8 x 16 x 32` **\[choice\]**: the middle extents divide 32 and their product is `D`; of
/// the shapes with that property (16 x 8, 8 x 16, 32 x 4, 4 x 32) it is the one whose analytic
/// costs come closest to the paper's calculated column (see docs/multimap.md).
pub fn experiment_4d() -> Experiment {
    let shape = vec![530, 32, 32, 32];
    let mut queries = beams(&shape);
    for q in [6u64, 10, 12] {
        queries.push(QuerySpec { name: format!("{q}^4 cube"), extent: vec![q; 4], per_cell: false });
    }
    Experiment { dims: 4, shape, cube: vec![530, 8, 16, 32], queries }
}

/// Table 3's figures for one row (MULTIMAP.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PaperRow {
    /// Naive, measured.
    pub naive_meas: f64,
    /// Naive, calculated.
    pub naive_calc: f64,
    /// MultiMap, measured.
    pub multimap_meas: f64,
    /// MultiMap, calculated.
    pub multimap_calc: f64,
}

/// Table 3 of the paper, by dims and row name.
pub fn paper_row(dims: usize, query: &str) -> Option<PaperRow> {
    let r = |a, b, c, d| Some(PaperRow { naive_meas: a, naive_calc: b, multimap_meas: c, multimap_calc: d });
    match (dims, query) {
        (3, "Dim_0 beam") => r(0.03, 0.03, 0.04, 0.03),
        (3, "Dim_1 beam") => r(2.7, 2.7, 1.7, 1.5),
        (3, "Dim_2 beam") => r(5.2, 4.3, 1.5, 1.5),
        (3, "1% cube") => r(294.0, 291.0, 205.0, 168.0),
        (3, "2% cube") => r(1086.0, 1156.0, 722.0, 723.0),
        (3, "3% cube") => r(2485.0, 2632.0, 1626.0, 1758.0),
        (4, "Dim_0 beam") => r(0.02, 0.02, 0.02, 0.02),
        (4, "Dim_1 beam") => r(5.5, 5.0, 2.1, 1.9),
        (4, "Dim_2 beam") => r(2.2, 4.0, 2.1, 1.9),
        (4, "Dim_3 beam") => r(4.86, 5.1, 1.8, 1.6),
        (4, "6^4 cube") => r(1142.0, 1065.0, 513.0, 436.0),
        (4, "10^4 cube") => r(5509.0, 5016.0, 1996.0, 2150.0),
        (4, "12^4 cube") => r(8905.0, 8714.0, 3590.0, 3960.0),
        _ => None,
    }
}

/// One row of our Table 3.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table3Row {
    /// 3 or 4.
    pub dims: usize,
    /// Row name as MULTIMAP.md §5 spells it.
    pub query: String,
    /// A beam (figures in ms per cell) rather than a cube (total ms).
    pub per_cell: bool,
    /// Analytic model, Naive.
    pub naive_calc: f64,
    /// Analytic model, MultiMap.
    pub multimap_calc: f64,
    /// Simulator, Naive.
    pub naive_sim: f64,
    /// Simulator, MultiMap.
    pub multimap_sim: f64,
    /// The paper's figures.
    pub paper: PaperRow,
}

impl Table3Row {
    /// Relative errors `(naive_calc, multimap_calc, naive_sim, multimap_sim)` against the
    /// paper's calculated (model) and measured (simulator) columns.
    pub fn errors(&self) -> [f64; 4] {
        let e = |ours: f64, theirs: f64| (ours - theirs).abs() / theirs;
        [
            e(self.naive_calc, self.paper.naive_calc),
            e(self.multimap_calc, self.paper.multimap_calc),
            e(self.naive_sim, self.paper.naive_meas),
            e(self.multimap_sim, self.paper.multimap_meas),
        ]
    }
}

/// Our Table 3.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table3 {
    /// 3-D rows then 4-D rows, in the paper's order.
    pub rows: Vec<Table3Row>,
}

#[derive(Serialize)]
struct JsonRow<'a> {
    dims: usize,
    query: &'a str,
    naive_calc: f64,
    multimap_calc: f64,
    naive_sim: f64,
    multimap_sim: f64,
}

impl Table3 {
    /// The `table3.json` form: a list of rows with the table's columns.
    pub fn to_json(&self) -> Result<String> {
        let rows: Vec<JsonRow<'_>> = self
            .rows
            .iter()
            .map(|r| JsonRow {
                dims: r.dims,
                query: &r.query,
                naive_calc: r.naive_calc,
                multimap_calc: r.multimap_calc,
                naive_sim: r.naive_sim,
                multimap_sim: r.multimap_sim,
            })
            .collect();
        Ok(serde_json::to_string_pretty(&rows)?)
    }

    /// A Markdown table: ours vs the paper's, with the error per cell.
    pub fn to_markdown(&self) -> String {
        let mut s = String::from(
            "| D | query | Naive calc (paper) | err | MultiMap calc (paper) | err | Naive sim (paper meas) | err | MultiMap sim (paper meas) | err |\n|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            let e = r.errors();
            let p = &r.paper;
            let f = format_value;
            s.push_str(&format!(
                "| {} | {} | {} ({}) | {:.1}% | {} ({}) | {:.1}% | {} ({}) | {:.1}% | {} ({}) | {:.1}% |\n",
                r.dims,
                r.query,
                f(r.naive_calc),
                p.naive_calc,
                e[0] * 100.0,
                f(r.multimap_calc),
                p.multimap_calc,
                e[1] * 100.0,
                f(r.naive_sim),
                p.naive_meas,
                e[2] * 100.0,
                f(r.multimap_sim),
                p.multimap_meas,
                e[3] * 100.0
            ));
        }
        s
    }

    /// The chart of one of the paper's figures: the `dims`-D rows (3: Figure 12, 4: Figure 13)
    /// that are beams (`beams`, part (a)) or cubes (part (b)). Per query, bars for Naive and MultiMap, ours (simulated) next to the paper's
    /// (measured), each with a tick at the matching calculated figure (our analytic model on our
    /// bars, the paper's calculated column on the paper's). Beams on a log axis (the Dim_0 beams
    /// are ~100 times faster per cell than the others), cubes on a linear one.
    pub fn figure(&self, dims: usize, beams: bool) -> BarChart {
        let (fig, ds) = if dims == 3 { (12, "3-D dataset") } else { (13, "4-D earthquake dataset") };
        let (part, kind, y_label, scale) = if beams {
            ("a", "beam queries", "I/O time per cell (ms, log scale)", Scale::Log)
        } else {
            ("b", "cube queries", "total I/O time (ms)", Scale::Linear)
        };
        let series = |name: &str, color: &str| Series { name: name.into(), color: color.into() };
        let bar = |value, marker| Bar { value, marker: Some(marker) };
        BarChart {
            title: format!("Figure {fig}({part}): {ds}, {kind}"),
            y_label: y_label.into(),
            scale,
            series: vec![
                series("Naive (ours, simulated)", "#b35806"),
                series("Naive (paper, measured)", "#fdb863"),
                series("MultiMap (ours, simulated)", "#2166ac"),
                series("MultiMap (paper, measured)", "#92c5de"),
            ],
            marker_name: Some(
                "calculated (analytic model): ours on our bars, the paper's Table 3 column on the paper's".into(),
            ),
            groups: self
                .rows
                .iter()
                .filter(|r| r.dims == dims && r.per_cell == beams)
                .map(|r| Group {
                    label: r.query.clone(),
                    bars: vec![
                        bar(r.naive_sim, r.naive_calc),
                        bar(r.paper.naive_meas, r.paper.naive_calc),
                        bar(r.multimap_sim, r.multimap_calc),
                        bar(r.paper.multimap_meas, r.paper.multimap_calc),
                    ],
                })
                .collect(),
        }
    }

    /// The four figures as `(file name, SVG)`: [`FIGURES`] in order.
    ///
    /// # Errors
    /// A figure the SVG writer rejects (a value that is not finite or not positive).
    pub fn figures_svg(&self) -> Result<Vec<(String, String)>> {
        FIGURES
            .iter()
            .map(|&(name, dims, beams)| Ok((format!("{name}.svg"), self.figure(dims, beams).to_svg()?)))
            .collect()
    }
}

/// The paper's figures that [`reproduce`] draws: file stem, dims, beams (`true`) or cubes.
pub const FIGURES: [(&str, usize, bool); 4] =
    [("figure12a", 3, true), ("figure12b", 3, false), ("figure13a", 4, true), ("figure13b", 4, false)];

/// SplitMix64: a small deterministic generator for query positions.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Mean simulated time of `query` over [`RUNS`] random placements (same placements for every
/// mapping); ms per cell for beams, total ms for cubes. Each run starts with the head parked on
/// track 0, so the first access pays a long seek like the model's `C_init`.
///
/// # Errors
/// A query whose rank differs from the mapping's or with an extent outside `1..=S_i`.
pub fn simulate(disk: &DiskModel, mapping: &dyn Mapping, query: &QuerySpec, seed: u64) -> Result<f64> {
    let shape = mapping.shape();
    ensure!(
        query.extent.len() == shape.len(),
        "{}: {} extents for a {}-D dataset",
        query.name,
        query.extent.len(),
        shape.len()
    );
    for (i, (&q, &s)) in query.extent.iter().zip(shape).enumerate() {
        ensure!(q >= 1 && q <= s, "{}: q_{i} = {q} outside 1..={s}", query.name);
    }
    let mut rng = SplitMix(seed);
    let cells: u64 = query.extent.iter().product();
    let mut total = 0.0;
    for _ in 0..RUNS {
        let lo: Vec<u64> = shape.iter().zip(&query.extent).map(|(s, q)| rng.below(s - q + 1)).collect();
        let mut sim = Simulator::new(disk);
        total += sim.replay(mapping.fetch_order(&lo, &query.extent).iter().map(|c| mapping.lbn(c)));
    }
    let mean = total / RUNS as f64;
    Ok(if query.per_cell { mean / cells as f64 } else { mean })
}

/// Compute the rows of one experiment.
///
/// # Errors
/// An experiment that does not fit the disk or a query outside its dataset.
pub fn run_experiment(disk: &DiskModel, params: &CostParams, exp: &Experiment) -> Result<Vec<Table3Row>> {
    // The chunk starts a third of the way in, like the model's C_init seek.
    let base_track = disk.cylinders / 3 * disk.surfaces;
    let naive = NaiveMapping::new(&exp.shape, base_track * disk.sectors_per_track)?;
    let mm = MultiMapMapping::new(disk, &exp.shape, &exp.cube, DEPTH, base_track)?;
    let mut rows = Vec::new();
    for (i, q) in exp.queries.iter().enumerate() {
        let cells: f64 = q.extent.iter().product::<u64>() as f64;
        let unit = if q.per_cell { cells } else { 1.0 };
        let paper = paper_row(exp.dims, &q.name).with_context(|| format!("no paper figures for {}", q.name))?;
        let seed = SEED ^ ((exp.dims as u64) << 32) ^ i as u64;
        rows.push(Table3Row {
            dims: exp.dims,
            query: q.name.clone(),
            per_cell: q.per_cell,
            naive_calc: params.naive_cost(&exp.shape, &q.extent)? / unit,
            multimap_calc: params.multimap_cost(&exp.shape, &exp.cube, &q.extent)? / unit,
            naive_sim: simulate(disk, &naive, q, seed)?,
            multimap_sim: simulate(disk, &mm, q, seed)?,
            paper,
        });
    }
    Ok(rows)
}

/// Reproduce Table 3 (3-D and 4-D) on the default disk and model parameters; with `out_dir`,
/// also write `out_dir/table3.json`, the Markdown table `out_dir/table3.md` (the one in
/// docs/multimap.md) and the paper's Figures 12(a)(b) and 13(a)(b) as `out_dir/figure12a.svg`,
/// `figure12b.svg`, `figure13a.svg` and `figure13b.svg` (the ones in docs/multimap/).
///
/// # Errors
/// Failing to create `out_dir` or write a file.
pub fn reproduce(out_dir: Option<&Path>) -> Result<Table3> {
    let disk = DiskModel::default();
    let params = CostParams::default();
    let mut rows = run_experiment(&disk, &params, &experiment_3d())?;
    rows.extend(run_experiment(&disk, &params, &experiment_4d())?);
    let table = Table3 { rows };
    if let Some(dir) = out_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("table3.json");
        std::fs::write(&path, table.to_json()?).with_context(|| format!("writing {}", path.display()))?;
        let path = dir.join("table3.md");
        std::fs::write(&path, table.to_markdown()).with_context(|| format!("writing {}", path.display()))?;
        for (name, svg) in table.figures_svg()? {
            let path = dir.join(name);
            std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(table)
}

/// `tessera multimap reproduce [--out DIR]`: compute Table 3, print it, write the JSON, the
/// Markdown table and the four figures.
///
/// # Errors
/// As [`reproduce`].
pub fn run_reproduce_command(out: Option<PathBuf>) -> Result<()> {
    let table = reproduce(out.as_deref())?;
    println!("MultiMap Table 3 (beams: ms per cell; cubes: total ms). Model vs the paper's calculated");
    println!("column, simulator vs its measured column.\n");
    print!("{}", table.to_markdown());
    if let Some(dir) = out {
        println!("\nwrote {}", dir.join("table3.json").display());
        println!("wrote {}", dir.join("table3.md").display());
        for (name, _, _) in FIGURES {
            println!("wrote {}", dir.join(format!("{name}.svg")).display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulate_rejects_queries_outside_the_dataset() {
        let disk = DiskModel::default();
        let m = NaiveMapping::new(&[8, 8], 0).expect("valid");
        let q = |extent: Vec<u64>| QuerySpec { name: "q".into(), extent, per_cell: false };
        assert!(simulate(&disk, &m, &q(vec![9, 1]), 1).is_err());
        assert!(simulate(&disk, &m, &q(vec![0, 1]), 1).is_err());
        assert!(simulate(&disk, &m, &q(vec![2, 2, 2]), 1).is_err());
        // a 2 x 2 box of sequential and one-track-apart blocks costs a few ms
        let t = simulate(&disk, &m, &q(vec![2, 2]), 1).expect("valid");
        assert!(t > 0.0 && t < 20.0);
    }

    #[test]
    fn figures_take_their_rows_and_columns() {
        let row = |dims, query: &str, per_cell, base: f64| Table3Row {
            dims,
            query: query.into(),
            per_cell,
            naive_calc: base + 1.0,
            multimap_calc: base + 2.0,
            naive_sim: base + 3.0,
            multimap_sim: base + 4.0,
            paper: paper_row(dims, query).expect("a Table 3 row"),
        };
        let table = Table3 {
            rows: vec![
                row(3, "Dim_0 beam", true, 0.0),
                row(3, "1% cube", false, 10.0),
                row(4, "Dim_2 beam", true, 20.0),
                row(4, "6^4 cube", false, 30.0),
                row(4, "10^4 cube", false, 40.0),
            ],
        };
        let f = table.figure(4, false);
        assert_eq!(f.title, "Figure 13(b): 4-D earthquake dataset, cube queries");
        assert_eq!(f.scale, Scale::Linear);
        let labels: Vec<_> = f.groups.iter().map(|g| g.label.as_str()).collect();
        assert_eq!(labels, ["6^4 cube", "10^4 cube"]);
        let b = &f.groups[1].bars;
        // Naive ours (sim, calc), Naive paper (meas, calc), MultiMap ours, MultiMap paper
        assert_eq!((b[0].value, b[0].marker), (43.0, Some(41.0)));
        assert_eq!((b[1].value, b[1].marker), (5509.0, Some(5016.0)));
        assert_eq!((b[2].value, b[2].marker), (44.0, Some(42.0)));
        assert_eq!((b[3].value, b[3].marker), (1996.0, Some(2150.0)));
        let f = table.figure(3, true);
        assert_eq!(f.scale, Scale::Log);
        assert_eq!(f.groups.len(), 1);
        assert_eq!(f.groups[0].bars[1].value, 0.03);
        let svgs = table.figures_svg().expect("valid");
        let names: Vec<_> = svgs.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(names, ["figure12a.svg", "figure12b.svg", "figure13a.svg", "figure13b.svg"]);
        assert!(svgs[2].1.contains("Figure 13(a): 4-D earthquake dataset, beam queries"));
    }

    #[test]
    fn every_experiment_row_has_paper_figures() {
        for e in [experiment_3d(), experiment_4d()] {
            for q in &e.queries {
                assert!(paper_row(e.dims, &q.name).is_some(), "{}", q.name);
            }
        }
    }
}
