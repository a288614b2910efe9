//! The benchmark's parameters (SSDB.md sections 1, 5 and 6): the configurations micro..large, the
//! easy/medium/hard object parameters, the query start sets, and the generator's random number
//! generator (`lcg`, `rand`, `norm`) with C `int` wraparound.

use std::fmt;
use std::str::FromStr;

/// World size per axis: coordinates 0..W-1 (benchGen.cc; the paper says 10^8).
pub const W: i64 = 1_000_000;
/// Images per cycle.
pub const CYCLE: u32 = 20;

/// One configuration of SSDB.md section 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Config {
    /// 40 images of 200^2 (tests).
    Micro,
    /// 160 images of 500^2.
    Tiny,
    /// 40 images of 1600^2 (the paper's reference "very small").
    VerySmall,
    /// 160 images of 3750^2.
    Small,
    /// 400 images of 7500^2.
    Normal,
    /// 1000 images of 15000^2.
    Large,
}

impl Config {
    /// Every configuration, smallest first.
    pub const ALL: [Config; 6] =
        [Config::Micro, Config::Tiny, Config::VerySmall, Config::Small, Config::Normal, Config::Large];

    /// The configuration's name as the command line takes it.
    pub fn name(self) -> &'static str {
        match self {
            Config::Micro => "micro",
            Config::Tiny => "tiny",
            Config::VerySmall => "very-small",
            Config::Small => "small",
            Config::Normal => "normal",
            Config::Large => "large",
        }
    }

    /// Number of images N.
    pub fn images(self) -> u32 {
        match self {
            Config::Micro | Config::VerySmall => 40,
            Config::Tiny | Config::Small => 160,
            Config::Normal => 400,
            Config::Large => 1000,
        }
    }

    /// Number of cycles (N / 20).
    pub fn cycles(self) -> u32 {
        self.images() / CYCLE
    }

    /// Image side S.
    pub fn side(self) -> i64 {
        match self {
            Config::Micro => 200,
            Config::Tiny => 500,
            Config::VerySmall => 1600,
            Config::Small => 3750,
            Config::Normal => 7500,
            Config::Large => 15000,
        }
    }

    /// Side R of the dense region.
    pub fn dense_range(self) -> i64 {
        match self {
            Config::Micro => 267,
            Config::Tiny => 1333,
            Config::VerySmall => 3162,
            Config::Small => 10_000,
            Config::Normal => 31_623,
            Config::Large => 100_000,
        }
    }

    /// Raw bytes of all images: N * S^2 cells of 11 int32.
    pub fn raw_bytes(self) -> u64 {
        let s = self.side().unsigned_abs();
        u64::from(self.images()) * s * s * 44
    }

    /// The object parameters every configuration uses (medium).
    pub fn objects(self) -> ObjectParams {
        ObjectParams::MEDIUM
    }

    /// The query slab sides (U1, U2, U3) of section 6: the published ones for small and up;
    /// below, U1 = S and U2, U3 scaled by S/3750 and rounded (section 6's rule, which gives its
    /// tiny and micro values; very-small: 4267 and 427).
    pub fn slabs(self) -> (i64, i64, i64) {
        match self {
            Config::Micro => (200, 533, 53),
            Config::Tiny => (500, 1333, 133),
            Config::VerySmall => (1600, 4267, 427), // 10000 * 1600 / 3750 = 4266.7, 426.7
            Config::Small | Config::Normal | Config::Large => (7500, 10_000, 1000),
        }
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Config {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Config::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Config::ALL.iter().map(|c| c.name()).collect();
            format!("unknown configuration {s:?}: expected one of {}", names.join(", "))
        })
    }
}

/// An exact rational p/q (q > 0, lowest terms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ratio {
    /// Numerator.
    pub p: i64,
    /// Denominator.
    pub q: i64,
}

/// The object parameters of one difficulty (section 6's second table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObjectParams {
    /// Largest object side kept (bbox), and the cooking chunks' overlap.
    pub d1: i64,
    /// Largest polygon kept (vertices).
    pub d2: i64,
    /// Grouping distance: squared distance <= D3 * dt.
    pub d3: Ratio,
    /// Q6 window side.
    pub d4: i64,
    /// Q6 count threshold.
    pub d5: i64,
    /// Q8/Q9 window side.
    pub d6: i64,
}

impl ObjectParams {
    /// Easy: D1 = D2 = 25, D3 = 0.05.
    pub const EASY: ObjectParams = ObjectParams { d1: 25, d2: 25, d3: Ratio { p: 1, q: 20 }, d4: 50, d5: 10, d6: 50 };
    /// Medium (the one every configuration uses): D1 = D2 = 50, D3 = 0.1.
    pub const MEDIUM: ObjectParams =
        ObjectParams { d1: 50, d2: 50, d3: Ratio { p: 1, q: 10 }, d4: 100, d5: 20, d6: 100 };
    /// Hard: D1 = D2 = 100, D3 = 0.2.
    pub const HARD: ObjectParams =
        ObjectParams { d1: 100, d2: 100, d3: Ratio { p: 1, q: 5 }, d4: 200, d5: 40, d6: 200 };
}

/// A query start point (world coordinates of the slab's lower-left corner).
pub type Start = (i64, i64);

/// The start sets of section 5 and 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StartSet {
    /// The published start points, scaled per configuration (section 6).
    Spec,
    /// Points spread over the dense region, so every query has an answer (section 5).
    Dense,
}

impl StartSet {
    /// Both sets.
    pub const ALL: [StartSet; 2] = [StartSet::Spec, StartSet::Dense];

    /// The set's name in the report and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            StartSet::Spec => "spec",
            StartSet::Dense => "dense",
        }
    }

    /// The five start points of `config`.
    pub fn points(self, config: Config) -> [Start; 5] {
        match self {
            StartSet::Spec => spec_starts(config),
            StartSet::Dense => dense_starts(config),
        }
    }
}

impl FromStr for StartSet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        StartSet::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown start set {s:?}: expected spec or dense"))
    }
}

/// The published start points (W = 10^6).
const PUBLISHED: [Start; 5] =
    [(503_000, 503_000), (504_000, 491_000), (500_000, 504_000), (504_000, 501_000), (504_000, 493_000)];

/// Section 6: the published points for small and up; the offsets from 500000 scaled by R/10^4
/// (rounded half to even) below. Tiny and micro give the table's values (checked by a test).
fn spec_starts(config: Config) -> [Start; 5] {
    let r = config.dense_range();
    if r >= 10_000 {
        return PUBLISHED;
    }
    PUBLISHED.map(|(x, y)| {
        (500_000 + round_ratio((x - 500_000) * r, 10_000), 500_000 + round_ratio((y - 500_000) * r, 10_000))
    })
}

/// Section 5: X = (W-R) div 2 + round(fx R), round half to even.
fn dense_starts(config: Config) -> [Start; 5] {
    const F: [(i64, i64); 5] = [(1, 1), (3, 5), (5, 2), (2, 4), (4, 3)];
    let r = config.dense_range();
    let base = (W - r) / 2;
    F.map(|(fx, fy)| (base + round_ratio(fx * r, 10), base + round_ratio(fy * r, 10)))
}

/// `a / b` rounded to the nearest integer, ties to even (b > 0), exactly.
pub fn round_ratio(a: i64, b: i64) -> i64 {
    let q = a.div_euclid(b);
    let r = a.rem_euclid(b);
    match (2 * r).cmp(&b) {
        std::cmp::Ordering::Less => q,
        std::cmp::Ordering::Greater => q + 1,
        std::cmp::Ordering::Equal => q + (q & 1),
    }
}

/// benchGen.cc's generator step: `(1103515245 x + 12345) & 0x3fffffff` in C `int` arithmetic.
pub fn lcg(x: i32) -> i32 {
    x.wrapping_mul(1_103_515_245).wrapping_add(12_345) & 0x3fff_ffff
}

/// `rand(t)`: `lcg` applied 10 times to t, divided by 2^30; in [0, 1).
pub fn rand(t: i32) -> f64 {
    let mut x = t;
    for _ in 0..10 {
        x = lcg(x);
    }
    f64::from(x) / f64::from(1u32 << 30)
}

/// `norm(t) = sum_{i=0..11} rand(12t + i) - 6` (12t + i in C `int`). The sum of twelve multiples
/// of 2^-30 below 12 is exact, so the order of additions does not matter.
pub fn norm(t: i32) -> f64 {
    let base = t.wrapping_mul(12);
    (0..12).map(|i| rand(base.wrapping_add(i))).sum::<f64>() - 6.0
}

/// Nominal lower-left corner (X, Y) of image `t` of `config` (section 1).
pub fn nominal_llc(config: Config, t: u32) -> (i64, i64) {
    let n = config.images();
    let t = if t >= n / 2 { t - n / 2 } else { t };
    let (s, r) = (config.side(), config.dense_range());
    // t < 1000, so 3t + 2 fits an i32.
    let t3 = i32::try_from(3 * t).unwrap_or(i32::MAX - 2);
    let (fx, fy) = (rand(t3 + 1), rand(t3 + 2));
    if rand(t3) < 0.8 {
        let base = (W - r) / 2;
        (base + trunc(fx * (r - s) as f64), base + trunc(fy * (r - s) as f64))
    } else {
        (trunc(fx * (W - s) as f64), trunc(fy * (W - s) as f64))
    }
}

/// The origin pixels of image `t` are rendered from: the nominal LLC moved by -1..1 per axis,
/// clamped at 0.
pub fn actual_origin(config: Config, t: u32) -> (i64, i64) {
    let (x, y) = nominal_llc(config, t);
    let dx = i64::from(t % 3) - 1;
    let dy = i64::from((t / 3) % 3) - 1;
    ((x + dx).max(0), (y + dy).max(0))
}

/// C's double-to-int cast: toward zero.
#[allow(clippy::cast_possible_truncation)]
fn trunc(v: f64) -> i64 {
    v.trunc() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generator against values computed with Python's unbounded integers masked the same way
    /// (only the low 30 bits survive, so C's wraparound at 32 bits cannot change them).
    #[test]
    fn lcg_known_values() {
        assert_eq!(lcg(0), 12345);
        assert_eq!(lcg(12345), 333_190_782);
        assert_eq!(lcg(2), 59_559_187);
        assert_eq!(lcg(0x3fff_ffff), 1_043_980_748);
        let scale = f64::from(1u32 << 30);
        assert_eq!(rand(0), 551_188_310.0 / scale);
        assert_eq!(rand(1), 267_834_847.0 / scale);
        assert_eq!(rand(3), 774_869_745.0 / scale);
        assert_eq!(rand(65_358), 1_034_533_908.0 / scale);
        assert_eq!(norm(5), 6_162_995_370.0 / scale - 6.0);
    }

    #[test]
    fn rand_and_norm_match_a_64_bit_reference() {
        // Reference: the same recurrence in i64 reduced mod 2^32 at each step.
        fn rand_ref(t: i64) -> f64 {
            let mut x = t & 0xffff_ffff;
            for _ in 0..10 {
                x = (1_103_515_245 * x + 12345) & 0xffff_ffff & 0x3fff_ffff;
            }
            x as f64 / 1_073_741_824.0
        }
        for t in [0, 1, 2, 3, 17, 999, 65_358, 392_153, 4_705_847, i32::MAX / 12] {
            assert_eq!(rand(t), rand_ref(i64::from(t)), "rand({t})");
            let n: f64 = (0..12).map(|i| rand_ref(12 * i64::from(t) + i)).sum::<f64>() - 6.0;
            assert_eq!(norm(t), n, "norm({t})");
            assert!((0.0..1.0).contains(&rand(t)));
            assert!((-6.0..6.0).contains(&norm(t)));
        }
        // rand(0): lcg applied to 0 ten times.
        let mut x = 0;
        for _ in 0..10 {
            x = lcg(x);
        }
        assert_eq!(rand(0), f64::from(x) / 1_073_741_824.0);
    }

    /// norm is centred, but its twelve draws come from consecutive seeds of a poor generator and
    /// are correlated: over the 65359 values the generator uses, the variance is 0.1929 (Python
    /// gives the same), not 1. The spec's formula is implemented as written.
    #[test]
    fn norm_is_centred_with_the_generators_variance() {
        let v: Vec<f64> = (0..65_359).map(norm).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((var - 0.192_855).abs() < 1e-5, "variance {var}");
    }

    #[test]
    fn configurations_follow_the_table() {
        let want = [
            ("micro", 40, 2, 200, 267),
            ("tiny", 160, 8, 500, 1333),
            ("very-small", 40, 2, 1600, 3162),
            ("small", 160, 8, 3750, 10_000),
            ("normal", 400, 20, 7500, 31_623),
            ("large", 1000, 50, 15_000, 100_000),
        ];
        for (c, (name, n, cycles, s, r)) in Config::ALL.into_iter().zip(want) {
            assert_eq!(name.parse::<Config>(), Ok(c));
            assert_eq!((c.name(), c.images(), c.cycles(), c.side(), c.dense_range()), (name, n, cycles, s, r));
        }
        assert!("huge".parse::<Config>().is_err());
        // About 70 MB and 1.76 GB raw.
        assert_eq!(Config::Micro.raw_bytes(), 70_400_000);
        assert_eq!(Config::Tiny.raw_bytes(), 1_760_000_000);
        // D3 = 0.1 exactly: 10 d^2 <= dt.
        assert_eq!(ObjectParams::MEDIUM.d3, Ratio { p: 1, q: 10 });
    }

    #[test]
    fn start_sets_follow_the_spec() {
        assert_eq!(
            StartSet::Spec.points(Config::Tiny),
            [(500_400, 500_400), (500_533, 498_800), (500_000, 500_533), (500_533, 500_133), (500_533, 499_067)]
        );
        assert_eq!(
            StartSet::Spec.points(Config::Micro),
            [(500_080, 500_080), (500_107, 499_760), (500_000, 500_107), (500_107, 500_027), (500_107, 499_813)]
        );
        assert_eq!(StartSet::Spec.points(Config::Small), PUBLISHED);
        // Micro: (W - R) div 2 = 499866; 0.1 * 267 = 26.7 -> 27; 0.5 * 267 = 133.5 -> 134 (even).
        let d = StartSet::Dense.points(Config::Micro);
        assert_eq!(d[0], (499_866 + 27, 499_866 + 27));
        assert_eq!(d[1], (499_866 + 80, 499_866 + 134));
        assert_eq!(round_ratio(5, 2), 2);
        assert_eq!(round_ratio(7, 2), 4);
        assert_eq!(round_ratio(-5, 2), -2);
        assert_eq!("dense".parse::<StartSet>(), Ok(StartSet::Dense));
    }

    #[test]
    fn second_half_repeats_the_first_halfs_positions() {
        for c in [Config::Micro, Config::Tiny, Config::Large] {
            let n = c.images();
            for t in 0..n / 2 {
                assert_eq!(nominal_llc(c, t), nominal_llc(c, t + n / 2));
                let (x, y) = nominal_llc(c, t);
                assert!(x >= 0 && y >= 0 && x + c.side() <= W && y + c.side() <= W);
                let (ax, ay) = actual_origin(c, t);
                assert!((ax - x).abs() <= 1 && (ay - y).abs() <= 1 && ax + c.side() <= W);
            }
        }
    }
}
