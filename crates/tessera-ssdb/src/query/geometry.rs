//! Exact integer geometry of the queries (SSDB.md §4): closed boxes, segments, polylines,
//! polygon regions (boundary plus the points of non-zero winding number) and convex hulls.
//! Coordinates are `i64`; products are taken in `i128`, so any `i64` input whose differences
//! fit an `i64` is exact (the stored world coordinates are below 2^20).

/// A point `[x, y]`.
pub type Pt = [i64; 2];

/// A closed box `[x0, x1] x [y0, y1]` (inclusive bounds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IBox {
    /// Lowest x.
    pub x0: i64,
    /// Lowest y.
    pub y0: i64,
    /// Highest x (inclusive).
    pub x1: i64,
    /// Highest y (inclusive).
    pub y1: i64,
}

impl IBox {
    /// The closed box of the half-open slab `[x, x + u) x [y, y + u)`: `[x, x+u-1] x [y, y+u-1]`.
    pub fn slab(x: i64, y: i64, u: i64) -> Self {
        Self { x0: x, y0: y, x1: x + u - 1, y1: y + u - 1 }
    }

    /// Whether `p` lies in the box.
    pub fn contains(&self, p: Pt) -> bool {
        (self.x0..=self.x1).contains(&p[0]) && (self.y0..=self.y1).contains(&p[1])
    }

    /// Whether the two closed boxes share a point.
    pub fn meets(&self, o: &IBox) -> bool {
        self.x0 <= o.x1 && o.x0 <= self.x1 && self.y0 <= o.y1 && o.y0 <= self.y1
    }

    /// The bounding box of `pts`; `None` when empty.
    pub fn of_points(pts: &[Pt]) -> Option<Self> {
        let first = pts.first()?;
        Some(pts.iter().fold(Self { x0: first[0], y0: first[1], x1: first[0], y1: first[1] }, |b, p| Self {
            x0: b.x0.min(p[0]),
            y0: b.y0.min(p[1]),
            x1: b.x1.max(p[0]),
            y1: b.y1.max(p[1]),
        }))
    }

    fn corners(&self) -> [Pt; 4] {
        [[self.x0, self.y0], [self.x1, self.y0], [self.x1, self.y1], [self.x0, self.y1]]
    }
}

/// `(a - o) x (b - o)`: > 0 when `b` is left of the line `o -> a`.
fn cross(o: Pt, a: Pt, b: Pt) -> i128 {
    let (ax, ay) = (i128::from(a[0]) - i128::from(o[0]), i128::from(a[1]) - i128::from(o[1]));
    let (bx, by) = (i128::from(b[0]) - i128::from(o[0]), i128::from(b[1]) - i128::from(o[1]));
    ax * by - ay * bx
}

/// Whether the closed segment `a`-`b` (a point when `a == b`) meets the closed box. Separating
/// axes of two convex sets: the box's two axes and the segment's normal; the sets meet iff none
/// separates them strictly.
pub fn segment_meets_box(a: Pt, b: Pt, bx: &IBox) -> bool {
    if a[0].max(b[0]) < bx.x0 || a[0].min(b[0]) > bx.x1 || a[1].max(b[1]) < bx.y0 || a[1].min(b[1]) > bx.y1 {
        return false;
    }
    let s = bx.corners().map(|c| cross(a, b, c).signum());
    !(s.iter().all(|&v| v > 0) || s.iter().all(|&v| v < 0))
}

/// The winding number of the closed polygon `poly` (vertices in order, last joined to first)
/// around `p`, which must not lie on its boundary (Sunday's crossing rule: an upward edge
/// crossing the ray to the right of `p` counts +1, a downward one -1).
pub fn winding_number(poly: &[Pt], p: Pt) -> i64 {
    let mut w = 0;
    for (i, &a) in poly.iter().enumerate() {
        let b = poly[(i + 1) % poly.len()];
        if a[1] <= p[1] {
            if b[1] > p[1] && cross(a, b, p) > 0 {
                w += 1;
            }
        } else if b[1] <= p[1] && cross(a, b, p) < 0 {
            w -= 1;
        }
    }
    w
}

/// Whether the region of `poly` (the closed curve through its vertices in order, plus the
/// points of non-zero winding number) meets the closed box. A 1-vertex polygon is a point, a
/// 2-vertex one a segment; repeated and self-touching vertices are fine. Either some edge meets
/// the box, or none does and the box (connected) lies in one face of the curve, where the
/// winding number is that of any box corner.
pub fn region_meets_box(poly: &[Pt], bx: &IBox) -> bool {
    let Some(pb) = IBox::of_points(poly) else { return false };
    if !pb.meets(bx) {
        return false; // bbox prefilter
    }
    let n = poly.len();
    if (0..n).any(|i| segment_meets_box(poly[i], poly[(i + 1) % n], bx)) {
        return true;
    }
    winding_number(poly, [bx.x0, bx.y0]) != 0
}

/// Whether the polyline through `pts` (a point when it has one) meets the closed box.
pub fn polyline_meets_box(pts: &[Pt], bx: &IBox) -> bool {
    match pts {
        [] => false,
        [p] => bx.contains(*p),
        _ => pts.windows(2).any(|w| segment_meets_box(w[0], w[1], bx)),
    }
}

/// The convex hull of `pts` (monotone chain), counter-clockwise, without collinear points: one
/// point for identical points, the two ends for collinear ones; empty for no points.
pub fn convex_hull(pts: &[Pt]) -> Vec<Pt> {
    let mut p = pts.to_vec();
    p.sort_unstable();
    p.dedup();
    if p.len() <= 2 {
        return p;
    }
    let mut hull: Vec<Pt> = Vec::with_capacity(2 * p.len());
    for pass in 0..2 {
        let start = hull.len();
        let iter: Box<dyn Iterator<Item = &Pt>> = if pass == 0 { Box::new(p.iter()) } else { Box::new(p.iter().rev()) };
        for &q in iter {
            while hull.len() >= start + 2 && cross(hull[hull.len() - 2], hull[hull.len() - 1], q) <= 0 {
                hull.pop();
            }
            hull.push(q);
        }
        hull.pop(); // the last point starts the other chain
    }
    hull
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(x0: i64, y0: i64, x1: i64, y1: i64) -> IBox {
        IBox { x0, y0, x1, y1 }
    }

    #[test]
    fn segments_and_boxes() {
        let bx = b(10, 10, 20, 20);
        // Touching a corner, an edge, passing through, missing by one cell diagonally.
        assert!(segment_meets_box([0, 0], [10, 10], &bx));
        assert!(segment_meets_box([0, 15], [10, 15], &bx));
        assert!(segment_meets_box([0, 0], [30, 30], &bx));
        // The bounding boxes overlap but the line passes above the corner (10, 20) (y = 25 at x = 10).
        assert!(!segment_meets_box([0, 15], [15, 30], &bx));
        assert!(segment_meets_box([0, 15], [5, 20], &b(5, 0, 9, 20)));
        assert!(!segment_meets_box([21, 0], [21, 40], &bx));
        // A degenerate segment is a point.
        assert!(segment_meets_box([20, 20], [20, 20], &bx));
        assert!(!segment_meets_box([21, 20], [21, 20], &bx));
        // The thin diagonal through (10, 20.5) misses the box [10,10]x[0,20]: x = 10 at y = 20.5.
        assert!(!segment_meets_box([0, 20], [20, 21], &b(10, 0, 10, 20)));
        assert!(segment_meets_box([0, 20], [20, 21], &b(10, 0, 10, 21)));
    }

    #[test]
    fn polygon_regions() {
        let square = [[0, 0], [10, 0], [10, 10], [0, 10]];
        // Box inside the polygon: no edge meets it, the winding number decides.
        assert!(region_meets_box(&square, &b(4, 4, 5, 5)));
        // Polygon inside the box.
        assert!(region_meets_box(&square, &b(-5, -5, 15, 15)));
        // Touching edges and corners (closed sets).
        assert!(region_meets_box(&square, &b(10, 3, 12, 4)));
        assert!(region_meets_box(&square, &b(10, 10, 12, 12)));
        assert!(!region_meets_box(&square, &b(11, 0, 12, 10)));
        // The same square traced clockwise: winding -1 is non-zero too.
        let cw = [[0, 0], [0, 10], [10, 10], [10, 0]];
        assert!(region_meets_box(&cw, &b(4, 4, 5, 5)));
        // A triangle whose bbox meets the box but the region does not.
        let tri = [[0, 0], [10, 0], [0, 10]];
        assert!(!region_meets_box(&tri, &b(6, 6, 9, 9)));
        assert!(region_meets_box(&tri, &b(5, 5, 9, 9)));
        // A single cell and a 2-vertex polygon.
        assert!(region_meets_box(&[[3, 3]], &b(3, 3, 3, 3)));
        assert!(!region_meets_box(&[[3, 3]], &b(4, 3, 5, 3)));
        assert!(region_meets_box(&[[0, 0], [4, 4]], &b(2, 2, 2, 2)));
        assert!(!region_meets_box(&[], &b(0, 0, 9, 9)));
    }

    #[test]
    fn self_touching_polygons() {
        // A line traced there and back (a Moore trace of three cells): no area, only its edges.
        let line = [[1, 1], [2, 1], [3, 1], [2, 1]];
        assert!(region_meets_box(&line, &b(3, 0, 5, 1)));
        assert!(!region_meets_box(&line, &b(4, 0, 5, 5)));
        assert!(!region_meets_box(&line, &b(1, 2, 3, 3)));
        // Two squares touching at one vertex, traced as one curve through it (a figure eight):
        // both lobes are inside, the gap beside the touching vertex is outside.
        let eight = [[0, 0], [4, 0], [4, 4], [8, 4], [8, 8], [4, 8], [4, 4], [0, 4]];
        assert!(region_meets_box(&eight, &b(1, 1, 2, 2)));
        assert!(region_meets_box(&eight, &b(6, 6, 7, 7)));
        assert!(!region_meets_box(&eight, &b(5, 1, 7, 3)));
        assert!(!region_meets_box(&eight, &b(1, 5, 3, 7)));
        assert!(region_meets_box(&eight, &b(4, 4, 4, 4)));
        // A curve that winds twice around its centre: winding 2 is inside.
        let twice = [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0], [10, 0], [10, 10], [0, 10]];
        assert_eq!(winding_number(&twice, [5, 5]), 2);
        assert!(region_meets_box(&twice, &b(5, 5, 5, 5)));
        // A hole made by going round the other way inside: winding 0 there, so outside.
        let ring = [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0], [3, 3], [3, 7], [7, 7], [7, 3], [3, 3]];
        assert_eq!(winding_number(&ring, [5, 5]), 0);
        assert!(!region_meets_box(&ring, &b(4, 4, 6, 6)));
        assert!(region_meets_box(&ring, &b(1, 1, 2, 2)));
    }

    #[test]
    fn hulls_and_polylines() {
        assert_eq!(convex_hull(&[[1, 1], [1, 1]]), vec![[1, 1]]);
        assert_eq!(convex_hull(&[[0, 0], [2, 2], [1, 1], [3, 3]]), vec![[0, 0], [3, 3]]);
        let h = convex_hull(&[[0, 0], [4, 0], [4, 4], [0, 4], [2, 2], [2, 0]]);
        assert_eq!(h, vec![[0, 0], [4, 0], [4, 4], [0, 4]]);
        assert!(convex_hull(&[]).is_empty());
        assert!(polyline_meets_box(&[[0, 0], [10, 0], [10, 10]], &b(10, 5, 12, 6)));
        assert!(!polyline_meets_box(&[[0, 0], [10, 0], [10, 10]], &b(2, 2, 8, 8)));
        assert!(polyline_meets_box(&[[3, 3]], &b(3, 3, 4, 4)));
    }
}
