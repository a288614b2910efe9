//! Commit records: the checksummed files `__commits/<seq>.commit` of the commit log
//! (docs/format.md, "Commit log"), and the position that orders fragments.
//!
//! A record is the JSON object `{"kind": ..., ...}` sealed with the footer (magic `TSRACMIT`):
//! - `write`: `{"kind": "write", "fragment": name}`: a fragment written by a write;
//! - `consolidation`: `{"kind": "consolidation", "fragment": name, "inputs": [entry, ...]}`: a
//!   fragment replacing the consecutive run `inputs`, oldest first;
//! - `checkpoint`: `{"kind": "checkpoint", "live": [entry, ...]}`: the visible fragments, oldest
//!   first, after every record before it (written by vacuum, which then deletes older records).
//!
//! An entry is `{"fragment": name, "position": p}` where `p` is the fragment's position: a
//! number (see [`Position::Seq`]) or `null` for fragments of format 1 and 2 arrays, whose
//! position comes from their name.
//!
//! Since format 8 a write or consolidation record may carry a copy of its fragment's metadata
//! file after the JSON text and one zero byte (JSON text never holds a zero byte), so that a
//! reader has the metadata as soon as it has the record: one request fewer per fragment on
//! object stores, one file fewer to open locally. Writers embed metadata of at most
//! [`MAX_EMBEDDED_METADATA`] bytes.

use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::footer::{seal, unseal};
use crate::fragment::FragmentName;

/// Footer magic of a commit record.
pub(crate) const RECORD_MAGIC: &[u8; 8] = b"TSRACMIT";

/// Suffix of a commit record's file name (`<seq as 20 decimal digits>.commit`).
pub(crate) const RECORD_SUFFIX: &str = ".commit";

/// The largest commit record read (a checkpoint of a million fragments is about 100 MB).
pub(crate) const MAX_RECORD_BYTES: u64 = 256 << 20;

/// The largest fragment metadata file a writer copies into its commit record (1 MiB). Every
/// open reads the metadata of each visible fragment anyway, so a copy costs nothing extra for
/// them; the bound keeps records that are read although their fragment is no longer visible
/// (consolidated, until vacuum) small. 64 uncompressed tiles of 2 MiB, with a checksum per
/// 4 KiB block, take 270 KB of metadata. Larger metadata is read from the fragment's own file,
/// as every fragment's was before format 8.
pub(crate) const MAX_EMBEDDED_METADATA: usize = 1 << 20;

/// Where a fragment stands in fragment order (later wins). Fragments of format 1 and 2 arrays
/// (committed by an `.ok` file) come first, ordered by their names' `(t1, t0, uuid)`; then the
/// fragments of the commit log by position: a write's position is its record's sequence number,
/// a consolidated fragment's the largest position among its inputs (it takes its last input's
/// place).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Position {
    /// A fragment committed by an `.ok` file (formats 1 and 2): `(t1, t0, uuid)` of its name.
    Legacy(u64, u64, String),
    /// A position in the commit log.
    Seq(u64),
}

impl Position {
    /// The position of a fragment of a format 1 or 2 array.
    pub(crate) fn legacy(name: &FragmentName) -> Self {
        Position::Legacy(name.t1, name.t0, name.uuid.clone())
    }
}

/// One fragment and its position, as listed by consolidation and checkpoint records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placed {
    /// The fragment.
    pub(crate) name: FragmentName,
    /// Its position in fragment order.
    pub(crate) position: Position,
}

/// What a commit record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    /// A fragment written by a write; its position is the record's sequence number.
    Write(FragmentName),
    /// A consolidated fragment and the run of fragments it replaces, oldest first.
    Consolidation(FragmentName, Vec<Placed>),
    /// The visible fragments, oldest first, after every earlier record.
    Checkpoint(Vec<Placed>),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryJson {
    fragment: String,
    position: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum RecordJson {
    Write { fragment: String },
    Consolidation { fragment: String, inputs: Vec<EntryJson> },
    Checkpoint { live: Vec<EntryJson> },
}

fn entry_json(p: &Placed) -> EntryJson {
    EntryJson {
        fragment: p.name.to_string(),
        position: match p.position {
            Position::Legacy(..) => None,
            Position::Seq(s) => Some(s),
        },
    }
}

impl Record {
    /// The record's bytes: JSON sealed with the footer.
    pub(crate) fn encode(&self) -> Vec<u8> {
        self.encode_with(None)
    }

    /// The record's bytes, with `metadata` (the bytes of the fragment's metadata file) after
    /// the JSON text and a zero byte when the record names one fragment (a write or a
    /// consolidation) and `metadata` is at most [`MAX_EMBEDDED_METADATA`] bytes.
    pub(crate) fn encode_with(&self, metadata: Option<&[u8]>) -> Vec<u8> {
        let json = match self {
            Record::Write(name) => RecordJson::Write { fragment: name.to_string() },
            Record::Consolidation(name, inputs) => RecordJson::Consolidation {
                fragment: name.to_string(),
                inputs: inputs.iter().map(entry_json).collect(),
            },
            Record::Checkpoint(live) => RecordJson::Checkpoint { live: live.iter().map(entry_json).collect() },
        };
        // Serializing plain strings and numbers cannot fail.
        let mut payload = serde_json::to_vec(&json).unwrap_or_default();
        let names_one = !matches!(self, Record::Checkpoint(_));
        if let Some(m) = metadata.filter(|m| names_one && !m.is_empty() && m.len() <= MAX_EMBEDDED_METADATA) {
            payload.reserve(1 + m.len());
            payload.push(0);
            payload.extend_from_slice(m);
        }
        seal(payload, RECORD_MAGIC)
    }

    /// Decodes the record stored at `path`, and where in `bytes` the copy of its fragment's
    /// metadata lies if it carries one (checked when the metadata is decoded).
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming `path` for a bad footer, checksum, JSON or fragment name, or a
    /// copy of metadata where none may be (a checkpoint's, or an empty one).
    pub(crate) fn decode_with(bytes: &[u8], path: &Path) -> Result<(Self, Option<Range<usize>>)> {
        let payload = unseal(bytes, RECORD_MAGIC, path)?;
        let (text, embedded) = match payload.iter().position(|&b| b == 0) {
            Some(i) => (&payload[..i], Some(i + 1..payload.len())),
            None => (payload, None),
        };
        let json: RecordJson = serde_json::from_slice(text)
            .map_err(|e| Error::corrupt(path, format!("commit record is not valid: {e}")))?;
        if let Some(r) = &embedded {
            if r.is_empty() || matches!(json, RecordJson::Checkpoint { .. }) {
                return Err(Error::corrupt(path, "commit record carries fragment metadata it may not hold"));
            }
        }
        Self::from_json(json, path).map(|record| (record, embedded))
    }

    fn from_json(json: RecordJson, path: &Path) -> Result<Self> {
        let name = |s: &str| {
            FragmentName::parse(s)
                .ok_or_else(|| Error::corrupt(path, format!("commit record names an invalid fragment {s:?}")))
        };
        let entries = |list: Vec<EntryJson>| {
            list.into_iter()
                .map(|e| {
                    let name = name(&e.fragment)?;
                    let position = e.position.map_or_else(|| Position::legacy(&name), Position::Seq);
                    Ok(Placed { name, position })
                })
                .collect::<Result<Vec<_>>>()
        };
        Ok(match json {
            RecordJson::Write { fragment } => Record::Write(name(&fragment)?),
            RecordJson::Consolidation { fragment, inputs } => {
                let inputs = entries(inputs)?;
                if inputs.len() < 2 {
                    return Err(Error::corrupt(path, "a consolidation record lists fewer than two inputs"));
                }
                Record::Consolidation(name(&fragment)?, inputs)
            }
            RecordJson::Checkpoint { live } => Record::Checkpoint(entries(live)?),
        })
    }
}

/// The file name of the record with sequence number `seq`.
pub(crate) fn record_file(seq: u64) -> String {
    format!("{seq:020}{RECORD_SUFFIX}")
}

/// The sequence number of a record's file name; `None` for other names.
pub(crate) fn parse_record_file(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(RECORD_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&s| s > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Record {
        fn decode(bytes: &[u8], path: &Path) -> Result<Self> {
            Self::decode_with(bytes, path).map(|(record, _)| record)
        }
    }

    fn placed(t: u64, seq: Option<u64>) -> Placed {
        let name = FragmentName::new(t);
        let position = seq.map_or_else(|| Position::legacy(&name), Position::Seq);
        Placed { name, position }
    }

    #[test]
    fn records_round_trip_and_every_flipped_bit_is_caught() {
        let records = [
            Record::Write(FragmentName::new(5)),
            Record::Consolidation(FragmentName::covering(1, 9), vec![placed(1, None), placed(9, Some(4))]),
            Record::Checkpoint(vec![placed(2, None), placed(3, Some(7))]),
            Record::Checkpoint(Vec::new()),
        ];
        for r in &records {
            let bytes = r.encode();
            assert_eq!(&Record::decode(&bytes, Path::new("r")).unwrap(), r);
            for bit in 0..bytes.len() * 8 {
                let mut bad = bytes.clone();
                bad[bit / 8] ^= 1 << (bit % 8);
                assert!(Record::decode(&bad, Path::new("r")).is_err(), "bit {bit} of {r:?}");
            }
        }
    }

    #[test]
    fn metadata_copies_ride_after_the_json_and_only_where_allowed() {
        let meta: Vec<u8> = (0..=255u8).cycle().take(1000).collect(); // zero bytes inside too
        let write = Record::Write(FragmentName::new(5));
        let bytes = write.encode_with(Some(&meta));
        let (back, range) = Record::decode_with(&bytes, Path::new("r")).unwrap();
        assert_eq!(back, write);
        assert_eq!(&bytes[range.unwrap()], meta.as_slice());
        let cons = Record::Consolidation(FragmentName::covering(1, 9), vec![placed(1, None), placed(9, Some(4))]);
        let (_, range) = Record::decode_with(&cons.encode_with(Some(&meta)), Path::new("r")).unwrap();
        assert_eq!(range.map(|r| r.len()), Some(meta.len()));
        // Not carried: a checkpoint's, an empty copy, one over the limit.
        let big = vec![1u8; MAX_EMBEDDED_METADATA + 1];
        for (r, m) in [(Record::Checkpoint(Vec::new()), &meta[..]), (write.clone(), &[][..]), (write.clone(), &big)] {
            let bytes = r.encode_with(Some(m));
            assert_eq!(bytes, r.encode());
            assert_eq!(Record::decode_with(&bytes, Path::new("r")).unwrap().1, None);
        }
        // A reader refuses what no writer makes.
        for text in [
            &b"{\"kind\":\"checkpoint\",\"live\":[]}\0x"[..],
            b"{\"kind\":\"write\",\"fragment\":\"__1_1_0123456789abcdef0123456789abcdef_8\"}\0",
        ] {
            let bytes = seal(text.to_vec(), RECORD_MAGIC);
            assert!(matches!(Record::decode_with(&bytes, Path::new("r")), Err(Error::Corrupt { .. })));
        }
    }

    #[test]
    fn positions_order_legacy_first() {
        let a = placed(100, None).position;
        let b = placed(200, None).position;
        assert!(a < b && b < Position::Seq(1) && Position::Seq(1) < Position::Seq(2));
    }

    #[test]
    fn record_file_names() {
        assert_eq!(record_file(42), "00000000000000000042.commit");
        assert_eq!(parse_record_file(&record_file(42)), Some(42));
        assert_eq!(parse_record_file(&record_file(u64::MAX)), Some(u64::MAX));
        for bad in ["42.commit", "00000000000000000000.commit", "0000000000000000004x.commit", "x.ok"] {
            assert_eq!(parse_record_file(bad), None, "{bad}");
        }
    }

    #[test]
    fn semantically_bad_records_are_corrupt() {
        let bad = [
            r#"{"kind":"write","fragment":"nope"}"#,
            r#"{"kind":"consolidation","fragment":"__1_1_0123456789abcdef0123456789abcdef_3","inputs":[]}"#,
            r#"{"kind":"other"}"#,
            r#"{"kind":"write","fragment":"__1_1_0123456789abcdef0123456789abcdef_3","extra":1}"#,
        ];
        for text in bad {
            let bytes = seal(text.as_bytes().to_vec(), RECORD_MAGIC);
            assert!(matches!(Record::decode(&bytes, Path::new("r")), Err(Error::Corrupt { .. })), "{text}");
        }
    }
}
