//! Keys and hashes of the run report (SSDB.md §5): an observation's key `"t,cx,cy,pixelSum"`, a
//! set of keys summarised by `sha256("\n".join(sorted(keys)))` (sorted as UTF-8 bytes, no
//! trailing newline, lowercase hex), a group's key (its member keys, sorted, joined with `;`),
//! and the F1 / F2 summaries of `report.json`.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::group::GroupSet;
use crate::observation::Observation;

/// `"t,cx,cy,pixelSum"`, decimal, world centre.
pub fn observation_key(o: &Observation) -> String {
    key_of(o.t, o.cx, o.cy, o.pixel_sum)
}

/// The key of an observation given by its parts.
pub fn key_of(t: i64, cx: i32, cy: i32, pixel_sum: i64) -> String {
    format!("{t},{cx},{cy},{pixel_sum}")
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// `sha256` (lowercase hex) of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `sha256("\n".join(sorted(keys)))`: `keys` sorted as UTF-8 byte strings (Rust's `str` order),
/// joined by newlines, no trailing newline.
pub fn sorted_keys_sha256(mut keys: Vec<String>) -> String {
    keys.sort_unstable();
    let mut h = Sha256::new();
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            h.update(b"\n");
        }
        h.update(k.as_bytes());
    }
    hex(&h.finalize())
}

/// A list of keys stored back to back in one buffer (~33 bytes a key instead of a `String`'s
/// ~60), for summaries over many observations.
#[derive(Debug, Clone, Default)]
pub struct KeyList {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl KeyList {
    /// Appends a key.
    pub fn push(&mut self, key: &str) {
        self.buf.extend_from_slice(key.as_bytes());
        self.ends.push(self.buf.len());
    }

    /// Appends an observation's key `"t,cx,cy,pixelSum"` without a temporary string.
    pub fn push_observation(&mut self, t: i64, cx: i32, cy: i32, pixel_sum: i64) {
        use std::io::Write;
        // Writing into a Vec cannot fail.
        let _ = write!(self.buf, "{t},{cx},{cy},{pixel_sum}");
        self.ends.push(self.buf.len());
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.buf[start..self.ends[i]]
    }

    /// [`sorted_keys_sha256`] of the keys held.
    pub fn sorted_sha256(&self) -> String {
        let mut order: Vec<usize> = (0..self.ends.len()).collect();
        order.sort_unstable_by(|&a, &b| self.get(a).cmp(self.get(b)));
        let mut h = Sha256::new();
        for (n, &i) in order.iter().enumerate() {
            if n > 0 {
                h.update(b"\n");
            }
            h.update(self.get(i));
        }
        hex(&h.finalize())
    }
}

/// The summary hash of a set of observations.
pub fn observation_keys_sha256(obs: &[Observation]) -> String {
    sorted_keys_sha256(obs.iter().map(observation_key).collect())
}

/// A group's key: its member keys, sorted, joined with `;`.
pub fn group_key(mut member_keys: Vec<String>) -> String {
    member_keys.sort_unstable();
    member_keys.join(";")
}

/// The summary hash of a set of groups given by their keys.
pub fn groups_sha256(group_keys: Vec<String>) -> String {
    sorted_keys_sha256(group_keys)
}

/// `report.json`'s `F1` (and `F1prime`): over all kept observations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct F1Summary {
    /// Number of observations.
    pub count: u64,
    /// Σ pixelSum.
    #[serde(rename = "pixelSum")]
    pub pixel_sum: i128,
    /// Σ |B|, the polygons' vertex counts.
    pub vertices: u64,
    /// [`observation_keys_sha256`] of all of them.
    pub observation_keys_sha256: String,
}

impl F1Summary {
    /// The summary of `obs`.
    pub fn of(obs: &[Observation]) -> Self {
        let mut acc = F1Accumulator::default();
        acc.add(obs);
        acc.finish()
    }
}

/// Builds an [`F1Summary`] image by image (keeps only the keys).
#[derive(Debug, Clone, Default)]
pub struct F1Accumulator {
    count: u64,
    pixel_sum: i128,
    vertices: u64,
    keys: KeyList,
}

impl F1Accumulator {
    /// Adds observations.
    pub fn add(&mut self, obs: &[Observation]) {
        for o in obs {
            self.count += 1;
            self.pixel_sum += i128::from(o.pixel_sum);
            self.vertices += o.polygon.len() as u64;
            self.keys.push_observation(o.t, o.cx, o.cy, o.pixel_sum);
        }
    }

    /// The summary of everything added.
    pub fn finish(self) -> F1Summary {
        F1Summary {
            count: self.count,
            pixel_sum: self.pixel_sum,
            vertices: self.vertices,
            observation_keys_sha256: self.keys.sorted_sha256(),
        }
    }
}

/// `report.json`'s `F2`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct F2Summary {
    /// All groups, singletons included.
    pub groups: u64,
    /// Groups of at least two members.
    pub multi_member_groups: u64,
    /// Groups of one member.
    pub singletons: u64,
    /// [`groups_sha256`] of all groups.
    pub groups_sha256: String,
}

impl F2Summary {
    /// The summary of a finished grouping.
    pub fn of(set: &GroupSet) -> Self {
        let singletons = set.groups.iter().filter(|g| g.members.len() == 1).count() as u64;
        let groups = set.groups.len() as u64;
        F2Summary {
            groups,
            multi_member_groups: groups - singletons,
            singletons,
            groups_sha256: groups_sha256(set.groups.iter().map(|g| g.key()).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(t: i64, cx: i32, cy: i32, pixel_sum: i64) -> Observation {
        Observation {
            id: 0,
            t,
            cycle: 0,
            cx,
            cy,
            pixel_sum,
            avg_dist: 0.0,
            bbox: [cx, cy, cx, cy],
            polygon: vec![[cx, cy]],
        }
    }

    #[test]
    fn keys_and_hashes_follow_the_text() {
        assert_eq!(observation_key(&obs(3, 500010, 499999, 1234)), "3,500010,499999,1234");
        // Known vectors: sha256("") and sha256("abc").
        assert_eq!(sorted_keys_sha256(vec![]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(
            sorted_keys_sha256(vec!["abc".into()]),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // Sorted as bytes ("10,..." before "9,..."), joined by "\n", no trailing newline.
        let a = obs(9, 1, 2, 3);
        let b = obs(10, 1, 2, 3);
        assert_eq!(observation_keys_sha256(&[a, b]), sha256_hex(b"10,1,2,3\n9,1,2,3"));
        assert_eq!(group_key(vec!["9,1,2,3".into(), "10,1,2,3".into()]), "10,1,2,3;9,1,2,3");
        // The compact list hashes as the strings do (a key that is a prefix of another sorts
        // first), and empty as sha256("").
        let mut list = KeyList::default();
        assert_eq!(list.sorted_sha256(), sorted_keys_sha256(vec![]));
        for k in ["9,1,2,3", "10,1,2,3", "10,1,2,30", "10,1,2,3"] {
            list.push(k);
        }
        list.push_observation(-1, 0, 7, 65535);
        let strings = vec!["9,1,2,3", "10,1,2,3", "10,1,2,30", "10,1,2,3", "-1,0,7,65535"];
        assert_eq!(list.sorted_sha256(), sorted_keys_sha256(strings.into_iter().map(String::from).collect()));
        assert_eq!(list.len(), 5);
    }

    #[test]
    fn f1_summary_counts_and_serialises_with_the_report_names() {
        let mut o = obs(1, 5, 6, 7000);
        o.polygon = vec![[5, 6], [6, 6], [5, 7]];
        let s = F1Summary::of(&[o.clone(), obs(2, 1, 1, 1000)]);
        assert_eq!((s.count, s.pixel_sum, s.vertices), (2, 8000, 4));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["pixelSum"], 8000);
        assert_eq!(json["observation_keys_sha256"], sha256_hex(b"1,5,6,7000\n2,1,1,1000"));
    }
}
