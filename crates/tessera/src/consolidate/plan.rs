//! Choosing the fragments to consolidate (pure). Inputs are always consecutive in fragment order:
//! the output takes the place of the last input, so a fragment left out between two inputs would
//! otherwise see older values win over it.

use crate::error::QueryError;
use crate::fragment::FragmentMetadata;

/// Which fragments to consolidate.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Selection {
    /// Every fragment.
    All,
    /// The fragments with these names.
    Names(Vec<String>),
    /// The fragments whose timestamps lie within `[t0, t1]`.
    Timestamps(u64, u64),
    /// Size-tiered (as in an LSM tree): the longest run of at least `min_fragments` consecutive
    /// fragments whose sizes are within a factor `ratio` of each other.
    SizeTiered {
        /// Largest size ratio inside a tier.
        ratio: f64,
        /// Fewest fragments worth merging.
        min_fragments: usize,
    },
}

/// What a consolidation will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsolidationPlan {
    /// Indices of the input fragments (consecutive, oldest first).
    pub inputs: Vec<usize>,
    /// Whether the output is a dense fragment (a dense array with a dense input).
    pub dense_output: bool,
    /// The output's timestamp range: from the inputs' first to their last timestamp.
    pub timestamps: (u64, u64),
}

/// Plans a consolidation of `fragments` (oldest first) of an array (`dense` schema or not);
/// `None` when fewer than two fragments are selected.
///
/// # Errors
/// Unknown fragment names, or a selection that is not consecutive in fragment order.
pub fn plan(
    fragments: &[FragmentMetadata],
    dense: bool,
    sel: &Selection,
) -> Result<Option<ConsolidationPlan>, QueryError> {
    let mut inputs: Vec<usize> = match sel {
        Selection::All => (0..fragments.len()).collect(),
        Selection::Names(names) => names
            .iter()
            .map(|n| {
                fragments
                    .iter()
                    .position(|f| f.name.to_string() == *n)
                    .ok_or_else(|| QueryError::UnknownFragment(n.clone()))
            })
            .collect::<Result<_, _>>()?,
        Selection::Timestamps(a, b) => {
            (0..fragments.len()).filter(|&i| fragments[i].name.t0 >= *a && fragments[i].name.t1 <= *b).collect()
        }
        Selection::SizeTiered { ratio, min_fragments } => size_tier(fragments, *ratio, *min_fragments),
    };
    inputs.sort_unstable();
    inputs.dedup();
    if inputs.len() < 2 {
        return Ok(None);
    }
    if let Some(w) = inputs.windows(2).find(|w| w[1] != w[0] + 1) {
        return Err(QueryError::WriteState(format!(
            "fragments to consolidate must be consecutive in fragment order: {} lies between {} and {}",
            fragments[w[0] + 1].name,
            fragments[w[0]].name,
            fragments[w[1]].name
        )));
    }
    let t0 = inputs.iter().map(|&i| fragments[i].name.t0).min().unwrap_or(0);
    let t1 = inputs.iter().map(|&i| fragments[i].name.t1).max().unwrap_or(0);
    let dense_output = dense && inputs.iter().any(|&i| fragments[i].is_dense());
    // A sparse output holds cells, not deletions: deletions in the run may be dropped only when
    // no older fragment remains for them to apply to. (A dense output holds the array's state,
    // deletions applied, over its whole box.)
    if !dense_output && inputs[0] != 0 && inputs.iter().any(|&i| fragments[i].is_delete()) {
        if matches!(sel, Selection::SizeTiered { .. }) {
            return Ok(None);
        }
        return Err(QueryError::WriteState(format!(
            "the fragments to consolidate hold deletions, which must still apply to {} older fragment(s): \
             start the run at the oldest fragment",
            inputs[0]
        )));
    }
    Ok(Some(ConsolidationPlan { inputs, dense_output, timestamps: (t0, t1) }))
}

/// The longest run of at least `min` consecutive fragments whose stored sizes are within a
/// factor `ratio` of each other (the newest such run on ties).
fn size_tier(fragments: &[FragmentMetadata], ratio: f64, min: usize) -> Vec<usize> {
    let size = |i: usize| fragments[i].stored_bytes().max(1) as f64;
    let mut best: (usize, usize) = (0, 0);
    let mut start = 0;
    while start < fragments.len() {
        let (mut lo, mut hi) = (size(start), size(start));
        let mut end = start + 1;
        while end < fragments.len() {
            let s = size(end);
            let (nlo, nhi) = (lo.min(s), hi.max(s));
            if nhi > nlo * ratio {
                break;
            }
            (lo, hi) = (nlo, nhi);
            end += 1;
        }
        if end - start >= best.1 - best.0 {
            best = (start, end);
        }
        start += 1;
    }
    if best.1 - best.0 >= min.max(2) {
        (best.0..best.1).collect()
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fragment::{FragmentName, TileEntry};

    fn frag(t: u64, bytes: u64) -> FragmentMetadata {
        FragmentMetadata {
            name: FragmentName::new(t),
            domain: vec![[0, 1]],
            cell_count: 1,
            files: vec![(
                "a0.data".into(),
                vec![TileEntry { offset: 0, stored_size: bytes, unfiltered_size: bytes, checksum: 0 }],
            )],
            sparse: None,
            deletes: None,
            blocks: Default::default(),
            chunks: Default::default(),
            stats: Default::default(),
            packed: false,
        }
    }

    #[test]
    fn selections() {
        let f: Vec<_> = [(1, 100), (2, 100), (3, 110), (4, 5000), (5, 90)].iter().map(|&(t, b)| frag(t, b)).collect();
        let p = plan(&f, true, &Selection::All).unwrap().unwrap();
        assert_eq!((p.inputs, p.timestamps, p.dense_output), (vec![0, 1, 2, 3, 4], (1, 5), true));
        let p = plan(&f, true, &Selection::Timestamps(2, 3)).unwrap().unwrap();
        assert_eq!(p.inputs, vec![1, 2]);
        let names = vec![f[1].name.to_string(), f[3].name.to_string()];
        let e = plan(&f, true, &Selection::Names(names)).unwrap_err().to_string();
        assert!(e.contains("consecutive"), "{e}");
        assert!(plan(&f, true, &Selection::Names(vec!["__nope".into()])).is_err());
        assert_eq!(plan(&f, true, &Selection::Timestamps(4, 4)).unwrap(), None);
        let p = plan(&f, true, &Selection::SizeTiered { ratio: 2.0, min_fragments: 3 }).unwrap().unwrap();
        assert_eq!(p.inputs, vec![0, 1, 2]);
        assert_eq!(plan(&f, true, &Selection::SizeTiered { ratio: 2.0, min_fragments: 4 }).unwrap(), None);
    }
}
