//! Keys and hashes of the run report (SSDB.md §5): an observation's key `"t,cx,cy,pixelSum"`, a
//! set of keys summarised by `sha256("\n".join(sorted(keys)))` (sorted as UTF-8 bytes, no
//! trailing newline, lowercase hex), a group's key (its member keys, sorted, joined with `;`),
//! and the F1 / F2 summaries of `report.json`.
//!
//! Over a whole run the keys do not fit in memory (~90 million for `large`): a [`KeySorter`]
//! spills them as sorted run files (one per cycle) and merges the runs into the hash at the end
//! (an external sort): memory is one run plus a read buffer per run merged.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;

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
        self.push_bytes(key.as_bytes());
    }

    fn push_bytes(&mut self, key: &[u8]) {
        self.buf.extend_from_slice(key);
        self.ends.push(self.buf.len());
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.ends.clear();
    }

    /// The key indices in key order.
    fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.ends.len()).collect();
        order.sort_unstable_by(|&a, &b| self.get(a).cmp(self.get(b)));
        order
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
        let mut h = JoinedSha256::default();
        for i in self.order() {
            h.update(self.get(i));
        }
        h.finish()
    }
}

/// `sha256` of keys fed in order, joined by newlines.
#[derive(Default)]
struct JoinedSha256 {
    h: Sha256,
    any: bool,
}

impl JoinedSha256 {
    fn update(&mut self, key: &[u8]) {
        if self.any {
            self.h.update(b"\n");
        }
        self.any = true;
        self.h.update(key);
    }

    fn finish(self) -> String {
        hex(&self.h.finalize())
    }
}

/// Runs merged at once; more are first merged into bigger runs, this many at a time.
const FAN_IN: usize = 64;
/// Read and write buffer of a run file.
const RUN_BUFFER: usize = 64 << 10;

/// [`sorted_keys_sha256`] over more keys than fit in memory: keys are collected until
/// [`KeySorter::spill`] (once a cycle), which writes them sorted to a run file in its folder
/// (records `u32` little-endian length, then the key's bytes); [`KeySorter::finish`] merges the
/// runs (k-way, `FAN_IN` at a time) into the hash and removes them. Without a folder nothing
/// is spilled. The run files are removed when the sorter is dropped, also on errors.
pub struct KeySorter {
    dir: Option<PathBuf>,
    keys: KeyList,
    runs: Vec<PathBuf>,
    next_run: usize,
    fan_in: usize,
}

impl KeySorter {
    /// A sorter that keeps every key in memory.
    pub fn in_memory() -> Self {
        Self { dir: None, keys: KeyList::default(), runs: Vec::new(), next_run: 0, fan_in: FAN_IN }
    }

    /// A sorter that spills its runs into `dir` (created when the first run is written; the
    /// sorter owns it: give each sorter its own folder).
    pub fn spilling(dir: impl Into<PathBuf>) -> Self {
        let mut s = Self::in_memory();
        s.dir = Some(dir.into());
        s
    }

    #[cfg(test)]
    pub(crate) fn with_fan_in(mut self, fan_in: usize) -> Self {
        self.fan_in = fan_in.max(2);
        self
    }

    /// Adds a key.
    pub fn push(&mut self, key: &[u8]) {
        self.keys.push_bytes(key);
    }

    /// Adds an observation's key `"t,cx,cy,pixelSum"`.
    pub fn push_observation(&mut self, t: i64, cx: i32, cy: i32, pixel_sum: i64) {
        self.keys.push_observation(t, cx, cy, pixel_sum);
    }

    /// Keys held in memory (not yet spilled).
    pub fn held(&self) -> usize {
        self.keys.len()
    }

    /// Run files written and not merged yet.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Writes the keys held as a sorted run file and forgets them (nothing without a folder or
    /// without keys).
    ///
    /// # Errors
    /// File system failures.
    pub fn spill(&mut self) -> io::Result<()> {
        if self.dir.is_none() || self.keys.is_empty() {
            return Ok(());
        }
        let mut w = self.new_run()?;
        for i in self.keys.order() {
            write_record(&mut w, self.keys.get(i))?;
        }
        // Flushed, not synced: a scratch file, read back by this process only.
        w.into_inner().map_err(io::IntoInnerError::into_error)?;
        self.keys.clear();
        Ok(())
    }

    fn new_run(&mut self) -> io::Result<BufWriter<File>> {
        let dir = self.dir.as_ref().ok_or_else(|| io::Error::other("no spill folder"))?;
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("run-{:06}", self.next_run));
        self.next_run += 1;
        let f = File::create(&path)?;
        self.runs.push(path);
        Ok(BufWriter::with_capacity(RUN_BUFFER, f))
    }

    /// [`sorted_keys_sha256`] of every key added; the run files are removed.
    ///
    /// # Errors
    /// File system failures, a run file that does not read back.
    pub fn finish(mut self) -> io::Result<String> {
        if self.runs.is_empty() {
            return Ok(self.keys.sorted_sha256());
        }
        self.spill()?;
        while self.runs.len() > self.fan_in {
            let batch: Vec<PathBuf> = self.runs.drain(..self.fan_in).collect();
            let mut w = self.new_run()?;
            merge(&batch, |k| write_record(&mut w, k))?;
            w.flush()?;
            drop(w);
            remove_all(&batch);
        }
        let mut h = JoinedSha256::default();
        merge(&self.runs, |k| {
            h.update(k);
            Ok(())
        })?;
        Ok(h.finish())
    }
}

impl Drop for KeySorter {
    fn drop(&mut self) {
        remove_all(&self.runs);
        if let Some(dir) = &self.dir {
            // Only if empty: the folder may have been there before.
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn remove_all(paths: &[PathBuf]) {
    for p in paths {
        let _ = std::fs::remove_file(p);
    }
}

fn write_record(w: &mut impl Write, key: &[u8]) -> io::Result<()> {
    let len = u32::try_from(key.len()).map_err(|_| io::Error::other("a key of 4 GiB or more"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(key)
}

/// The next record of a run, into `buf`; false at the end.
fn read_record(r: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    buf.clear();
    // Read through `take`: a corrupt length cannot allocate more than the file holds.
    let got = r.by_ref().take(len as u64).read_to_end(buf)?;
    if got != len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a key sort run file ends inside a record"));
    }
    Ok(true)
}

/// Feeds the keys of the sorted `runs` to `out` in order (duplicates kept).
fn merge(runs: &[PathBuf], mut out: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
    let mut readers = Vec::with_capacity(runs.len());
    let mut heap = BinaryHeap::with_capacity(runs.len());
    for (i, p) in runs.iter().enumerate() {
        let mut r = BufReader::with_capacity(RUN_BUFFER, File::open(p)?);
        let mut k = Vec::new();
        if read_record(&mut r, &mut k)? {
            heap.push(Reverse((k, i)));
        }
        readers.push(r);
    }
    while let Some(Reverse((mut k, i))) = heap.pop() {
        out(&k)?;
        if read_record(&mut readers[i], &mut k)? {
            heap.push(Reverse((k, i)));
        }
    }
    Ok(())
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
        let mut keys = KeyList::default();
        for o in obs {
            keys.push_observation(o.t, o.cx, o.cy, o.pixel_sum);
        }
        F1Summary {
            count: obs.len() as u64,
            pixel_sum: obs.iter().map(|o| i128::from(o.pixel_sum)).sum(),
            vertices: obs.iter().map(|o| o.polygon.len() as u64).sum(),
            observation_keys_sha256: keys.sorted_sha256(),
        }
    }
}

/// Builds an [`F1Summary`] image by image (keeps only the keys, in a [`KeySorter`]).
pub struct F1Accumulator {
    count: u64,
    pixel_sum: i128,
    vertices: u64,
    keys: KeySorter,
}

impl Default for F1Accumulator {
    fn default() -> Self {
        Self::new(KeySorter::in_memory())
    }
}

impl F1Accumulator {
    /// An accumulator keeping its keys in `keys`.
    pub fn new(keys: KeySorter) -> Self {
        Self { count: 0, pixel_sum: 0, vertices: 0, keys }
    }

    /// Spills the keys added so far (see [`KeySorter::spill`]).
    ///
    /// # Errors
    /// File system failures.
    pub fn spill(&mut self) -> io::Result<()> {
        self.keys.spill()
    }

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
    ///
    /// # Errors
    /// Spilled keys that cannot be read back.
    pub fn finish(self) -> io::Result<F1Summary> {
        Ok(F1Summary {
            count: self.count,
            pixel_sum: self.pixel_sum,
            vertices: self.vertices,
            observation_keys_sha256: self.keys.finish()?,
        })
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

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// The external sort hashes as the in-memory sort does, whatever the runs (empty ones,
        /// duplicates across runs, keys that prefix others) and with several merge passes.
        #[test]
        fn spilled_runs_hash_as_the_in_memory_sort(
            runs in prop::collection::vec(
                prop::collection::vec(prop::collection::vec(prop::sample::select(b"0129,-;".to_vec()), 0..6), 0..20),
                0..12,
            ),
            fan_in in 2usize..5,
            spill_last in any::<bool>(),
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("sort");
            let mut sorter = KeySorter::spilling(&dir).with_fan_in(fan_in);
            let mut all = Vec::new();
            for (i, run) in runs.iter().enumerate() {
                for k in run {
                    sorter.push(k);
                    all.push(String::from_utf8(k.clone()).unwrap());
                }
                if i + 1 < runs.len() || spill_last {
                    sorter.spill().unwrap();
                }
            }
            prop_assert_eq!(sorter.finish().unwrap(), sorted_keys_sha256(all));
            // The runs and their folder are gone.
            prop_assert!(!dir.exists());
        }
    }
}
