//! Resolving the commit log into the visible fragments (pure): which fragments a reader sees, in
//! which order, and which consolidation records lost a conflict (docs/format.md, "Commit log").
//!
//! The state starts from the newest checkpoint (or, without one, from the fragments of format 1
//! and 2 committed by `.ok` files, less those their `.vac` lists supersede) and applies the
//! records after it in sequence order:
//! - a write adds its fragment at position = its sequence number (after everything before it);
//! - a consolidation is **valid** when each of its inputs is visible at the position the record
//!   gives and no other visible fragment lies between its first and last input; a valid one
//!   replaces its inputs, taking its last input's position, and an invalid one is ignored.
//!
//! So of two consolidations of overlapping inputs only the first committed counts, and a
//! fragment committed while a consolidation ran is ordered after the consolidated fragment
//! (its position is larger than every input's): its cells win, as they must.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::log::Log;
use super::record::{Placed, Position, Record};
use crate::error::{Error, Result};
use crate::fragment::FragmentName;

/// The visible fragments of an array at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The visible fragments, oldest first in fragment order.
    pub(crate) live: Vec<Placed>,
    /// Consolidated fragments whose records lost a conflict (or came too late): never visible.
    pub(crate) invalid: Vec<FragmentName>,
}

/// The visible fragments and their order, as the log says, seeing only fragments whose `t1` is
/// at most `end` (time travel; `u64::MAX` for the latest state).
///
/// # Errors
/// [`Error::Corrupt`] for a checkpoint that lists one fragment or position twice.
pub(crate) fn resolve(log: &Log, commits_dir: &Path, end: u64) -> Result<Resolved> {
    let mut state = State::default();
    let mut invalid = Vec::new();
    match &log.checkpoint {
        Some((seq, live)) => {
            for p in live.iter().filter(|p| p.name.t1 <= end) {
                if !state.insert(p.clone()) {
                    return Err(Error::corrupt(
                        commits_dir.join(super::record::record_file(*seq)),
                        format!("checkpoint lists fragment {} or its position twice", p.name),
                    ));
                }
            }
        }
        None => {
            let kept: Vec<&FragmentName> = log.legacy.iter().filter(|n| n.t1 <= end).collect();
            let mut superseded = std::collections::HashSet::new();
            for (output, inputs) in &log.legacy_vac {
                if kept.contains(&output) {
                    superseded.extend(inputs.iter().map(|n| n.uuid.as_str()));
                }
            }
            for n in kept.into_iter().filter(|n| !superseded.contains(n.uuid.as_str())) {
                state.insert(Placed { name: n.clone(), position: Position::legacy(n) });
            }
        }
    }
    for (seq, record) in &log.records {
        match record {
            Record::Write(name) if name.t1 <= end => {
                // A second record of one fragment (never written by this engine) is ignored.
                state.insert(Placed { name: name.clone(), position: Position::Seq(*seq) });
            }
            Record::Consolidation(name, inputs) if name.t1 <= end && !state.replace(name, inputs) => {
                invalid.push(name.clone());
            }
            _ => {}
        }
    }
    Ok(Resolved { live: state.by_position.into_values().collect(), invalid })
}

/// Whether `inputs` (a consolidation's, oldest first) are visible in `live` (oldest first) at
/// the positions given, with no other visible fragment between the first and the last: the
/// test a consolidation record must pass to count.
pub(crate) fn inputs_are_consecutive(live: &[Placed], inputs: &[Placed]) -> bool {
    let Some(start) = live.iter().position(|p| Some(p) == inputs.first()) else { return false };
    live.get(start..start + inputs.len()) == Some(inputs)
}

#[derive(Default)]
struct State {
    by_position: BTreeMap<Position, Placed>,
    /// uuid -> position of every visible fragment.
    positions: HashMap<String, Position>,
}

impl State {
    /// Adds a fragment; `false` (and nothing changes) if its name or position is taken.
    fn insert(&mut self, p: Placed) -> bool {
        if self.positions.contains_key(&p.name.uuid) || self.by_position.contains_key(&p.position) {
            return false;
        }
        self.positions.insert(p.name.uuid.clone(), p.position.clone());
        self.by_position.insert(p.position.clone(), p);
        true
    }

    /// Replaces the consecutive visible run `inputs` by `output` at the last input's position;
    /// `false` (and nothing changes) when `inputs` are not such a run or the output's name is
    /// taken.
    fn replace(&mut self, output: &FragmentName, inputs: &[Placed]) -> bool {
        let (Some(first), Some(last)) = (inputs.first(), inputs.last()) else { return false };
        if self.positions.contains_key(&output.uuid) || first.position > last.position {
            return false;
        }
        let run: Vec<&Placed> =
            self.by_position.range(first.position.clone()..=last.position.clone()).map(|(_, p)| p).collect();
        if run.len() != inputs.len() || run.iter().zip(inputs).any(|(a, b)| *a != b) {
            return false;
        }
        for p in inputs {
            self.by_position.remove(&p.position);
            self.positions.remove(&p.name.uuid);
        }
        self.insert(Placed { name: output.clone(), position: last.position.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(t: u64) -> FragmentName {
        FragmentName::new(t)
    }

    fn log(records: Vec<(u64, Record)>) -> Log {
        Log { records, ..Log::default() }
    }

    fn at(name: &FragmentName, seq: u64) -> Placed {
        Placed { name: name.clone(), position: Position::Seq(seq) }
    }

    fn names(r: &Resolved) -> Vec<FragmentName> {
        r.live.iter().map(|p| p.name.clone()).collect()
    }

    #[test]
    fn writes_are_ordered_by_commit_not_by_timestamp() {
        let (a, b) = (w(20), w(10));
        let r =
            resolve(&log(vec![(1, Record::Write(a.clone())), (2, Record::Write(b.clone()))]), Path::new("c"), u64::MAX)
                .unwrap();
        assert_eq!(names(&r), vec![a.clone(), b.clone()]);
        // Time travel still selects by timestamp.
        let r = resolve(&log(vec![(1, Record::Write(a)), (2, Record::Write(b.clone()))]), Path::new("c"), 15).unwrap();
        assert_eq!(names(&r), vec![b]);
    }

    #[test]
    fn a_write_committed_during_a_consolidation_orders_after_it() {
        // The lost write of issue 12: w1 started first (older timestamp) but committed after the
        // consolidation of w0 and w2.
        let (w0, w2, w1) = (w(1), w(3), w(2));
        let c = FragmentName::covering(1, 3);
        let r = resolve(
            &log(vec![
                (1, Record::Write(w0.clone())),
                (2, Record::Write(w2.clone())),
                (3, Record::Consolidation(c.clone(), vec![at(&w0, 1), at(&w2, 2)])),
                (4, Record::Write(w1.clone())),
            ]),
            Path::new("c"),
            u64::MAX,
        )
        .unwrap();
        assert_eq!(names(&r), vec![c, w1]);
    }

    #[test]
    fn of_two_overlapping_consolidations_the_first_committed_counts() {
        let f: Vec<_> = (1..=4).map(w).collect();
        let (c1, c2) = (FragmentName::covering(1, 3), FragmentName::covering(2, 4));
        let records = vec![
            (1, Record::Write(f[0].clone())),
            (2, Record::Write(f[1].clone())),
            (3, Record::Write(f[2].clone())),
            (4, Record::Write(f[3].clone())),
            (5, Record::Consolidation(c2.clone(), vec![at(&f[1], 2), at(&f[2], 3), at(&f[3], 4)])),
            (6, Record::Consolidation(c1.clone(), vec![at(&f[0], 1), at(&f[1], 2), at(&f[2], 3)])),
        ];
        let r = resolve(&log(records), Path::new("c"), u64::MAX).unwrap();
        assert_eq!(names(&r), vec![f[0].clone(), c2]);
        assert_eq!(r.invalid, vec![c1]);
    }

    #[test]
    fn a_consolidation_skipping_a_visible_fragment_is_invalid() {
        let f: Vec<_> = (1..=3).map(w).collect();
        let c = FragmentName::covering(1, 3);
        let records = vec![
            (1, Record::Write(f[0].clone())),
            (2, Record::Write(f[1].clone())),
            (3, Record::Write(f[2].clone())),
            (4, Record::Consolidation(c.clone(), vec![at(&f[0], 1), at(&f[2], 3)])),
        ];
        let r = resolve(&log(records), Path::new("c"), u64::MAX).unwrap();
        assert_eq!(names(&r), f);
        assert_eq!(r.invalid, vec![c]);
    }

    #[test]
    fn a_checkpoint_replaces_what_came_before() {
        let (a, b, c) = (w(1), w(2), w(3));
        let l = Log {
            legacy: vec![w(0)],
            checkpoint: Some((7, vec![at(&a, 3), at(&b, 5)])),
            records: vec![(8, Record::Write(c.clone()))],
            ..Log::default()
        };
        assert_eq!(names(&resolve(&l, Path::new("c"), u64::MAX).unwrap()), vec![a.clone(), b.clone(), c]);
        let dup = Log { checkpoint: Some((7, vec![at(&a, 3), at(&b, 3)])), ..Log::default() };
        assert!(matches!(resolve(&dup, Path::new("c"), u64::MAX), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn legacy_vac_lists_apply_when_their_output_is_kept() {
        let (a, b) = (w(1), w(2));
        let c = FragmentName::covering(1, 2);
        let l = Log {
            legacy: vec![a.clone(), b.clone(), c.clone()],
            legacy_vac: vec![(c.clone(), vec![a.clone(), b.clone()])],
            ..Log::default()
        };
        assert_eq!(names(&resolve(&l, Path::new("c"), u64::MAX).unwrap()), vec![c]);
        // As of before the consolidated fragment, its inputs are visible.
        assert_eq!(names(&resolve(&l, Path::new("c"), 1).unwrap()), vec![a]);
        let _ = b;
    }
}
