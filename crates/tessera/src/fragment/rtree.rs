//! A packed R-tree over the MBRs of a sparse fragment's data tiles. Tiles are in global order,
//! so consecutive tiles are spatially close and packing them `fanout` at a time bottom-up gives
//! tight nodes. Level 0 are the tiles themselves (their MBRs live in the metadata); level `l + 1`
//! node `j` bounds level-`l` nodes `[j * fanout, (j + 1) * fanout)`; the last level is the root.

use crate::geometry::Rect;

/// Children per node.
pub(crate) const FANOUT: usize = 16;

/// The inner levels of a packed R-tree (the leaves are the tile MBRs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RTree {
    /// Children per node.
    pub fanout: u32,
    /// Inner levels, from the one above the leaves up to the root.
    pub levels: Vec<Vec<Rect>>,
}

fn union(rects: &[Rect]) -> Rect {
    let mut u = rects[0].clone();
    for r in &rects[1..] {
        for (a, b) in u.iter_mut().zip(r) {
            a[0] = a[0].min(b[0]);
            a[1] = a[1].max(b[1]);
        }
    }
    u
}

impl RTree {
    /// Packs the tile MBRs `leaves`.
    pub(crate) fn build(leaves: &[Rect], fanout: usize) -> Self {
        let mut levels: Vec<Vec<Rect>> = Vec::new();
        let mut below: &[Rect] = leaves;
        let mut owned;
        while below.len() > 1 {
            owned = below.chunks(fanout).map(union).collect::<Vec<_>>();
            levels.push(owned.clone());
            below = levels.last().map_or(&[], Vec::as_slice);
        }
        Self { fanout: fanout as u32, levels }
    }

    /// Indices of the leaves for which `hit` holds, in order, visiting only nodes for which it
    /// holds (`hit` must hold for a node whenever it holds for one of its children).
    pub(crate) fn search(&self, leaves: &[Rect], hit: impl Fn(&Rect) -> bool) -> Vec<usize> {
        let f = self.fanout.max(1) as usize;
        // Candidates at the current level, starting from the root.
        let mut cand: Vec<usize> = match self.levels.last() {
            Some(top) => (0..top.len()).filter(|&i| hit(&top[i])).collect(),
            None => (0..leaves.len()).filter(|&i| hit(&leaves[i])).collect(),
        };
        if self.levels.is_empty() {
            return cand;
        }
        for l in (0..self.levels.len()).rev() {
            let below: &[Rect] = if l == 0 { leaves } else { &self.levels[l - 1] };
            cand = cand
                .iter()
                .flat_map(|&j| (j * f..((j + 1) * f).min(below.len())).filter(|&c| hit(&below[c])))
                .collect();
        }
        cand
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn search_equals_a_scan(boxes in prop::collection::vec((0u64..100, 0u64..10, 0u64..100, 0u64..10), 0..200),
                                q in (0u64..100, 0u64..30, 0u64..100, 0u64..30), fanout in 2usize..6) {
            let leaves: Vec<Rect> = boxes.iter().map(|&(x, w, y, h)| vec![[x, x + w], [y, y + h]]).collect();
            let t = RTree::build(&leaves, fanout);
            let qr: Rect = vec![[q.0, q.0 + q.1], [q.2, q.2 + q.3]];
            let hit = |r: &Rect| r.iter().zip(&qr).all(|(a, b)| a[0] <= b[1] && b[0] <= a[1]);
            let expect: Vec<usize> = (0..leaves.len()).filter(|&i| hit(&leaves[i])).collect();
            prop_assert_eq!(t.search(&leaves, hit), expect);
        }
    }
}
