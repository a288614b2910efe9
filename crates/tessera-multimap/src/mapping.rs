//! Mappings of N-D cells (one cell = one logical block) to LBNs (MULTIMAP.md §3).
//!
//! - [`NaiveMapping`]: row-major linearisation with Dim_0 fastest (the "major order").
//! - [`MultiMapMapping`]: the space is cut into basic cubes of extent `K`; inside a cube Dim_0
//!   runs along a track and Dim_i (i ≥ 1) steps to the `(K_1···K_{i-1})`-th adjacent block
//!   (`GETADJACENT`), so every pair of neighbouring cells is sequential or adjacent. Cubes are
//!   linearised row-major (Dim_0 fastest); when `K_0 < T`, `floor(T/K_0)` cubes share one group
//!   of tracks side by side **\[choice\]**.

use crate::disk::DiskModel;
use anyhow::{bail, ensure, Result};

/// A mapping of the cells of an N-D box to logical blocks.
pub trait Mapping {
    /// Extents `S_0..S_{N-1}` of the mapped dataset.
    fn shape(&self) -> &[u64];
    /// LBN of `cell` (`cell[i] < shape[i]`; the caller checks).
    fn lbn(&self, cell: &[u64]) -> u64;
    /// The order in which a query fetches the cells of the box `lo .. lo + q`: by default
    /// Dim_0 first, then Dim_1, ... ([`box_cells`]).
    fn fetch_order(&self, lo: &[u64], q: &[u64]) -> Vec<Vec<u64>> {
        box_cells(lo, q)
    }
}

fn check_shape(shape: &[u64]) -> Result<u64> {
    ensure!(!shape.is_empty(), "shape: at least one dimension is needed");
    let mut cells: u64 = 1;
    for (i, &s) in shape.iter().enumerate() {
        ensure!(s >= 1, "shape: Dim_{i} has extent 0");
        cells = cells
            .checked_mul(s)
            .ok_or_else(|| anyhow::anyhow!("shape: the number of cells overflows u64 at Dim_{i}"))?;
    }
    Ok(cells)
}

/// Row-major linearisation, Dim_0 fastest, starting at `base_lbn`.
#[derive(Debug, Clone)]
pub struct NaiveMapping {
    shape: Vec<u64>,
    base_lbn: u64,
}

impl NaiveMapping {
    /// A naive mapping of `shape` starting at `base_lbn`.
    ///
    /// # Errors
    /// An empty shape, a zero extent, or a dataset that overflows the LBN space.
    pub fn new(shape: &[u64], base_lbn: u64) -> Result<Self> {
        let cells = check_shape(shape)?;
        ensure!(base_lbn.checked_add(cells).is_some(), "base_lbn {base_lbn} + {cells} cells overflows u64");
        Ok(NaiveMapping { shape: shape.to_vec(), base_lbn })
    }
}

impl Mapping for NaiveMapping {
    fn shape(&self) -> &[u64] {
        &self.shape
    }

    fn lbn(&self, cell: &[u64]) -> u64 {
        let mut lbn = 0;
        for (&x, &s) in cell.iter().zip(&self.shape).rev() {
            lbn = lbn * s + x;
        }
        self.base_lbn + lbn
    }
}

/// The MultiMap mapping (MULTIMAP.md §3) on a [`DiskModel`].
#[derive(Debug, Clone)]
pub struct MultiMapMapping {
    disk: DiskModel,
    shape: Vec<u64>,
    cube: Vec<u64>,
    /// Cubes along each dimension, `ceil(S_i / K_i)`.
    grid: Vec<u64>,
    /// Tracks one cube group spans, `K_1 ··· K_{N-1}`.
    tracks_per_cube: u64,
    /// Cubes side by side on one group of tracks, `floor(T / K_0)`.
    cubes_per_group: u64,
    base_track: u64,
}

impl MultiMapMapping {
    /// Map `shape` with basic cube `cube` on `disk`, adjacency depth `depth` (`D`), starting at
    /// track `base_track`.
    ///
    /// # Errors
    /// Fewer than two dimensions; a basic cube violating MULTIMAP.md §3 (`K_i >= 2`,
    /// `K_0 <= T`, `K_{N-1} <= S_{N-1}`, `K_1···K_{N-2} <= D`, `D` at most the adjacency the
    /// disk reaches within the adjacency angle); or a dataset that does not fit on the disk.
    pub fn new(disk: &DiskModel, shape: &[u64], cube: &[u64], depth: u64, base_track: u64) -> Result<Self> {
        check_shape(shape)?;
        let n = shape.len();
        ensure!(n >= 2, "shape: MultiMap needs at least 2 dimensions, got {n}");
        ensure!(cube.len() == n, "cube: {} extents for a {n}-D shape", cube.len());
        for (i, &k) in cube.iter().enumerate() {
            ensure!(k >= 2, "cube: K_{i} = {k}, must be >= 2");
        }
        let t = disk.sectors_per_track;
        ensure!(cube[0] <= t, "cube: K_0 = {} exceeds the track length T = {t}", cube[0]);
        ensure!(
            cube[n - 1] <= shape[n - 1],
            "cube: K_{} = {} exceeds S_{} = {}",
            n - 1,
            cube[n - 1],
            n - 1,
            shape[n - 1]
        );
        let prod = |xs: &[u64], what: &str| {
            xs.iter()
                .try_fold(1u64, |a, &b| a.checked_mul(b))
                .ok_or_else(|| anyhow::anyhow!("cube: {what} overflows u64"))
        };
        let middle = prod(&cube[1..n - 1], "K_1···K_{N-2}")?;
        ensure!(middle <= depth, "cube: K_1···K_{} = {middle} exceeds the adjacency depth D = {depth}", n - 2);
        // D tracks must be reachable within the adjacency angle W, else "adjacent" blocks would
        // cost missed revolutions.
        let reach_ms = disk.alpha_ms();
        let far = disk.seek_ms(depth.div_ceil(disk.surfaces));
        if far > reach_ms {
            bail!("depth: D = {depth} tracks need a {far:.3} ms seek, more than the adjacency time {reach_ms:.3} ms");
        }
        let grid: Vec<u64> = shape.iter().zip(cube).map(|(s, k)| s.div_ceil(*k)).collect();
        let tracks_per_cube = prod(&cube[1..], "K_1···K_{N-1}")?;
        let cubes_per_group = t / cube[0];
        // grid_i <= S_i and check_shape bounded Π S_i
        let cubes: u64 = grid.iter().product();
        let groups = cubes.div_ceil(cubes_per_group);
        let end = groups
            .checked_mul(tracks_per_cube)
            .and_then(|x| x.checked_add(base_track))
            .ok_or_else(|| anyhow::anyhow!("shape: the dataset's track count overflows"))?;
        ensure!(end <= disk.tracks(), "shape: the dataset needs tracks up to {end}, the disk has {}", disk.tracks());
        Ok(MultiMapMapping {
            disk: disk.clone(),
            shape: shape.to_vec(),
            cube: cube.to_vec(),
            grid,
            tracks_per_cube,
            cubes_per_group,
            base_track,
        })
    }

    /// The basic cube `K`.
    pub fn cube(&self) -> &[u64] {
        &self.cube
    }

    /// First LBN (the cell `(0,…,0)`) of the basic cube at grid position `c`.
    fn cube_start(&self, c: &[u64]) -> u64 {
        let mut lin = 0;
        for (&ci, &g) in c.iter().zip(&self.grid).rev() {
            lin = lin * g + ci;
        }
        let group = lin / self.cubes_per_group;
        let slot = lin % self.cubes_per_group;
        (self.base_track + group * self.tracks_per_cube) * self.disk.sectors_per_track + slot * self.cube[0]
    }

    /// Linear (storage) index of the basic cube holding `cell`.
    fn cube_index(&self, cell: &[u64]) -> u64 {
        let mut lin = 0;
        for ((&x, &k), &g) in cell.iter().zip(&self.cube).zip(&self.grid).rev() {
            lin = lin * g + x / k;
        }
        lin
    }

    /// `MAP(x)` of MULTIMAP.md §3 for the in-cube coordinates `x` of a cube starting at `start`.
    fn map_in_cube(&self, start: u64, x: &[u64]) -> u64 {
        let t = self.disk.sectors_per_track;
        let mut lbn = start / t * t + (start + x[0]) % t;
        let mut step = 1;
        for (&xi, &ki) in x.iter().zip(&self.cube).skip(1) {
            for _ in 0..xi {
                // The constructor checked that every track of every cube is on the disk.
                lbn = self.disk.get_adjacent(lbn, step).unwrap_or(lbn);
            }
            step *= ki;
        }
        lbn
    }
}

impl Mapping for MultiMapMapping {
    fn shape(&self) -> &[u64] {
        &self.shape
    }

    fn lbn(&self, cell: &[u64]) -> u64 {
        let c: Vec<u64> = cell.iter().zip(&self.cube).map(|(x, k)| x / k).collect();
        let x: Vec<u64> = cell.iter().zip(&self.cube).map(|(x, k)| x % k).collect();
        self.map_in_cube(self.cube_start(&c), &x)
    }

    /// Basic cube by basic cube in storage order, Dim_0 first inside each: the query's
    /// requests for one cube are issued together (MULTIMAP.md §3: "the drive can reorder a
    /// batch of requests"), so a query pays each cube crossing once instead of at every
    /// Dim_1 run that straddles a boundary **\[choice\]**.
    fn fetch_order(&self, lo: &[u64], q: &[u64]) -> Vec<Vec<u64>> {
        let mut cells = box_cells(lo, q);
        cells.sort_by_key(|c| self.cube_index(c)); // stable: Dim_0-first order inside a cube
        cells
    }
}

/// Every cell of the box `lo .. lo + q` in fetch order (Dim_0 fastest), MULTIMAP.md §4.
pub fn box_cells(lo: &[u64], q: &[u64]) -> Vec<Vec<u64>> {
    let total: u64 = q.iter().product();
    let mut out = Vec::with_capacity(total as usize);
    let mut cur: Vec<u64> = vec![0; q.len()];
    for _ in 0..total {
        out.push(cur.iter().zip(lo).map(|(c, l)| c + l).collect());
        for i in 0..q.len() {
            cur[i] += 1;
            if cur[i] < q[i] {
                break;
            }
            cur[i] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naive_is_row_major_dim0_fastest() {
        let m = NaiveMapping::new(&[4, 3, 2], 10).expect("valid");
        assert_eq!(m.lbn(&[0, 0, 0]), 10);
        assert_eq!(m.lbn(&[1, 0, 0]), 11);
        assert_eq!(m.lbn(&[0, 1, 0]), 14);
        assert_eq!(m.lbn(&[0, 0, 1]), 22);
        assert_eq!(m.lbn(&[3, 2, 1]), 33);
    }

    #[test]
    fn multimap_rejects_bad_cubes() {
        let d = DiskModel::default();
        assert!(MultiMapMapping::new(&d, &[10], &[2], 128, 0).is_err());
        assert!(MultiMapMapping::new(&d, &[10, 10], &[1, 2], 128, 0).is_err());
        assert!(MultiMapMapping::new(&d, &[1000, 10], &[687, 2], 128, 0).is_err());
        assert!(MultiMapMapping::new(&d, &[10, 10], &[2, 11], 128, 0).is_err());
        assert!(MultiMapMapping::new(&d, &[10, 200, 10], &[2, 129, 2], 128, 0).is_err());
        assert!(MultiMapMapping::new(&d, &[10, 200, 10], &[2, 128, 2], 128, 0).is_ok());
        // extents whose products overflow are refused, not wrapped
        let err = MultiMapMapping::new(&d, &[10, 4, 4, 4], &[2, 1 << 40, 1 << 40, 2], 128, 0).expect_err("overflow");
        assert!(err.to_string().contains("overflows"), "{err}");
        // a dataset larger than the disk
        assert!(MultiMapMapping::new(&d, &[686, 100_000, 10], &[686, 128, 10], 128, 0).is_err());
    }

    #[test]
    fn multimap_fetch_order_is_cube_by_cube_permutation() {
        let d = DiskModel::default();
        let m = MultiMapMapping::new(&d, &[6, 6, 6], &[3, 2, 6], 128, 0).expect("valid");
        let order = m.fetch_order(&[1, 1, 2], &[4, 3, 2]);
        let mut sorted = order.clone();
        sorted.sort();
        let mut plain = box_cells(&[1, 1, 2], &[4, 3, 2]);
        plain.sort();
        assert_eq!(sorted, plain);
        let idx: Vec<u64> = order.iter().map(|c| m.cube_index(c)).collect();
        assert!(idx.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn box_cells_in_fetch_order() {
        let cells = box_cells(&[1, 5], &[2, 2]);
        assert_eq!(cells, vec![vec![1, 5], vec![2, 5], vec![1, 6], vec![2, 6]]);
    }
}
