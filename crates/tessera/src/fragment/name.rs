//! Fragment names `__<t0>_<t1>_<uuid>_<v>`: the timestamps a fragment covers (what time travel
//! selects by), a random uuid and the format version. Fragment *order* is not taken from names
//! but from the commit log (`crate::commit`), except for fragments of format 1 and 2 arrays.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::footer::FORMAT_VERSION;

/// The parsed name of a fragment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FragmentName {
    /// First timestamp covered (milliseconds since the Unix epoch).
    pub t0: u64,
    /// Last timestamp covered.
    pub t1: u64,
    /// 32 lower-case hex digits, unique per fragment.
    pub uuid: String,
    /// Format version of the fragment.
    pub version: u32,
}

impl FragmentName {
    /// A new name for a fragment written at `t`.
    pub fn new(t: u64) -> Self {
        Self::covering(t, t)
    }

    /// A new name for a fragment covering timestamps `[t0, t1]` (consolidation output).
    pub fn covering(t0: u64, t1: u64) -> Self {
        Self { t0, t1, uuid: uuid::Uuid::new_v4().simple().to_string(), version: FORMAT_VERSION }
    }

    /// Parses `__t0_t1_uuid_v`.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix("__")?;
        let mut it = rest.split('_');
        let t0 = it.next()?.parse().ok()?;
        let t1 = it.next()?.parse().ok()?;
        let uuid = it.next()?.to_string();
        let version = it.next()?.parse().ok()?;
        if it.next().is_some()
            || t0 > t1
            || uuid.len() != 32
            || !uuid.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        Some(Self { t0, t1, uuid, version })
    }
}

impl fmt::Display for FragmentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "__{}_{}_{}_{}", self.t0, self.t1, self.uuid, self.version)
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

static LAST: Mutex<Option<HashMap<PathBuf, u64>>> = Mutex::new(None);

/// The timestamp of a new fragment of the array at `array`: `max(now, last + 1)` where `last`
/// is the previous timestamp this process handed out for the array path (as given: naming
/// touches no file system), so timestamps are strictly increasing per array within a process.
/// (They choose what time travel sees; the order of fragments is their commit order.)
pub(crate) fn next_timestamp(array: &Path) -> u64 {
    let key = array.to_path_buf();
    let mut guard = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    let last = map.get(&key).copied();
    let t = now_ms().max(last.map_or(0, |l| l.saturating_add(1)));
    map.insert(key, t);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_reject_garbage() {
        let n = FragmentName::new(17);
        assert_eq!(FragmentName::parse(&n.to_string()), Some(n));
        for bad in ["", "__1_2", "__2_1_0123456789abcdef0123456789abcdef_1", "x1_2_abc_1", "__1_2_XYZ_1"] {
            assert_eq!(FragmentName::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn timestamps_strictly_increase_per_array() {
        let p = Path::new("/nonexistent/array/for/timestamps");
        let a = next_timestamp(p);
        let b = next_timestamp(p);
        let c = next_timestamp(p);
        assert!(a < b && b < c);
    }
}
