//! An observation: one object found by cooking (F1, F1') in one image, in world coordinates
//! (SSDB.md §2, "Output per observation").

use serde::{Deserialize, Serialize};

/// Images per cycle: `cycle = t div 20` (SSDB.md §1).
pub const IMAGES_PER_CYCLE: i64 = 20;

/// One cooked object of one image, in world coordinates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// 1, 2, ... over the kept observations in time order, inside an image in raster order of each
    /// object's first cell; assigned by the caller ([`assign_ids`]); 0 until then.
    pub id: i64,
    /// Image time.
    pub t: i64,
    /// `t div 20`.
    pub cycle: i64,
    /// Centre x: `(Σ v·x) div Σ v`, world.
    pub cx: i32,
    /// Centre y: `(Σ v·y) div Σ v`, world.
    pub cy: i32,
    /// `Σ v` over the object's cells.
    pub pixel_sum: i64,
    /// `Σ v·|(x,y) - (x̄,ȳ)| / Σ v` around the float centroid.
    pub avg_dist: f64,
    /// Inclusive cell bounds `[xmin, ymin, xmax, ymax]`, world.
    pub bbox: [i32; 4],
    /// The Moore-neighbour trace of the outer boundary, `[x, y]` cells, world.
    pub polygon: Vec<[i32; 2]>,
}

impl Observation {
    /// The observation's key `"t,cx,cy,pixelSum"` (SSDB.md §5).
    pub fn key(&self) -> String {
        crate::keys::observation_key(self)
    }
}

/// The cycle of image `t`.
pub fn cycle_of(t: i64) -> i64 {
    t.div_euclid(IMAGES_PER_CYCLE)
}

/// Numbers `obs` (one image's observations, in the order cooking returned them) from `next`;
/// returns the next free id.
pub fn assign_ids(obs: &mut [Observation], next: i64) -> i64 {
    let mut id = next;
    for o in obs {
        o.id = id;
        id += 1;
    }
    id
}
