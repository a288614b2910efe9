//! Where a fragment's block checksums (docs/format.md §8.1) are kept: inline in the fragment
//! metadata (section `BLKS`), or, since version 9, apart in the fragment's file
//! `__block_checksums` (section `BLKF` names the files whose tiles have them), so that opening an
//! array does not read the checksums of every 4 KiB block of every large tile. Apart checksums
//! are read per tile when a read of part of a tile first needs them and are verified against
//! the tile checksum (the xxh3-64 of them) before use; a whole-tile read needs none of them (it
//! recomputes them from the bytes).

use std::path::Path;
use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::footer::seal;
use crate::fragment::blocks::{verify_sums, wants_blocks};
use crate::fragment::metadata::{Reader, TileEntry};
use crate::storage::Bytes;

pub use crate::paths::BLOCK_SUMS_FILE;
/// The footer magic of the block-checksum file.
pub(crate) const BLOCK_SUMS_MAGIC: &[u8; 8] = b"TSRABLKS";
/// Tag of the inline block-checksum section ("BLKS", version 2).
pub(super) const INLINE_TAG: &[u8; 4] = b"BLKS";
/// Tag of the section naming the files whose block checksums are kept apart ("BLKF", version 9).
pub(super) const APART_TAG: &[u8; 4] = b"BLKF";
/// Writers keep block checksums apart when a fragment has more than this many by default
/// (`sm.write.inline_block_checksums`; 64 KiB of them, for 32 MiB of tiles in 4 KiB blocks);
/// fewer stay inline, where opening reads them with the rest of the metadata at no extra
/// request.
pub const INLINE_BLOCK_SUMS: u64 = 8192;

/// Block checksums of a fragment's unfiltered tiles (format version 2; empty for fragments of
/// version 1 and for tiles of at most two blocks). See `fragment/blocks.rs`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockIndex {
    /// Blocks are `2^log2` bytes.
    pub log2: u32,
    /// Per file, per tile: the checksums of the tile's blocks when they are inline (empty: the
    /// tile has none inline).
    pub sums: Vec<Vec<Vec<u64>>>,
    /// Checksums kept in `BLOCK_SUMS_FILE` (version 9), if any.
    apart: Option<Apart>,
}

/// The block checksums of a fragment kept in its file `BLOCK_SUMS_FILE`.
#[derive(Debug, Clone, Default)]
struct Apart {
    /// The file numbers whose tiles of more than two blocks have checksums, ascending.
    files: Vec<u32>,
    /// Per file, per tile: the first checksum's index in the file and the count (0: none).
    at: Vec<Vec<(u64, u64)>>,
    /// Per file, per tile: the checksums once read and verified.
    loaded: Vec<Vec<OnceLock<Box<[u64]>>>>,
}

impl PartialEq for Apart {
    fn eq(&self, other: &Self) -> bool {
        self.files == other.files && self.at == other.at
    }
}

impl Eq for Apart {}

impl BlockIndex {
    /// Inline block checksums `sums` (per file, per tile) of blocks of `2^log2` bytes.
    pub fn inline(log2: u32, sums: Vec<Vec<Vec<u64>>>) -> Self {
        Self { log2, sums, apart: None }
    }

    /// The inline block checksums of tile `tile` of file `file`, if it has them inline.
    pub fn of(&self, file: usize, tile: u64) -> Option<&[u64]> {
        self.sums.get(file)?.get(usize::try_from(tile).ok()?).filter(|s| !s.is_empty()).map(Vec::as_slice)
    }

    /// The number of blocks of tile `tile` of file `file` if it has block checksums (inline or
    /// apart).
    pub fn count(&self, file: usize, tile: u64) -> Option<u64> {
        if let Some(s) = self.of(file, tile) {
            return Some(s.len() as u64);
        }
        let apart = self.apart.as_ref()?;
        let (_, n) = *apart.at.get(file)?.get(usize::try_from(tile).ok()?)?;
        (n > 0).then_some(n)
    }

    /// Whether the checksums are kept in `BLOCK_SUMS_FILE`.
    pub fn is_apart(&self) -> bool {
        self.apart.is_some()
    }

    /// The block checksums of tile `tile` of file `file` (`entry`, its tile entry), if it has
    /// them: inline, or read with `read(offset, len)` from `BLOCK_SUMS_FILE` the first time
    /// (then kept) and verified against the tile checksum. `path` names that file in errors.
    ///
    /// # Errors
    /// A failed read, or checksums that do not make the tile checksum (corruption of `path`).
    pub(crate) fn sums(
        &self,
        (file, tile): (usize, u64),
        entry: &TileEntry,
        path: &Path,
        read: impl FnOnce(u64, u64) -> Result<Bytes>,
    ) -> Result<Option<&[u64]>> {
        if let Some(s) = self.of(file, tile) {
            return Ok(Some(s));
        }
        let Some(apart) = &self.apart else { return Ok(None) };
        let t = usize::try_from(tile).unwrap_or(usize::MAX);
        let (Some(&(first, n)), Some(slot)) =
            (apart.at.get(file).and_then(|a| a.get(t)), apart.loaded.get(file).and_then(|l| l.get(t)))
        else {
            return Ok(None);
        };
        if n == 0 {
            return Ok(None);
        }
        if let Some(s) = slot.get() {
            return Ok(Some(s));
        }
        // `first + n` is bounded at decoding; the read is bounded by the file's size.
        let bytes = read(first * 8, n * 8)?;
        if bytes.len() as u64 != n * 8 {
            return Err(Error::corrupt(path, format!("file {file}, tile {tile}: block checksums cut short")));
        }
        let sums: Box<[u64]> =
            bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect();
        verify_sums(&sums, entry.checksum).map_err(|(stored, computed)| {
            Error::corrupt(
                path,
                format!(
                    "file {file}, tile {tile}: block checksums do not match the tile checksum (stored {stored:016x}, computed {computed:016x})"
                ),
            )
        })?;
        Ok(Some(slot.get_or_init(|| sums)))
    }

    /// Inline tiles with checksums: (file, tile, checksums).
    fn entries(&self) -> impl Iterator<Item = (usize, usize, &Vec<u64>)> {
        self.sums
            .iter()
            .enumerate()
            .flat_map(|(f, tiles)| tiles.iter().enumerate().filter(|(_, s)| !s.is_empty()).map(move |(t, s)| (f, t, s)))
    }

    /// The files whose inline checksums may be kept apart: when there are more than
    /// `inline_max` and every tile of those files has checksums exactly when §8.1 says it
    /// does (else `None`: they stay inline).
    fn apart_files(&self, files: &[(String, Vec<TileEntry>)], inline_max: u64) -> Option<Vec<u32>> {
        if self.apart.is_some() || self.entries().map(|e| e.2.len() as u64).sum::<u64>() <= inline_max {
            return None;
        }
        let with: Vec<usize> = (0..self.sums.len()).filter(|&f| self.sums[f].iter().any(|s| !s.is_empty())).collect();
        let by_rule = with.iter().all(|&f| {
            files.get(f).is_some_and(|(_, tiles)| {
                tiles.iter().enumerate().all(|(t, e)| {
                    let n = self.sums[f].get(t).map_or(0, Vec::len) as u64;
                    let want =
                        if wants_blocks(e.stored_size, self.log2) { e.stored_size.div_ceil(1 << self.log2) } else { 0 };
                    n == want
                })
            })
        });
        by_rule.then(|| with.iter().map(|&f| f as u32).collect())
    }

    /// Appends the block-checksum section, if any (after the tile index): inline checksums (at
    /// most `inline_max` of them), or the files whose checksums are apart.
    pub(super) fn encode(&self, files: &[(String, Vec<TileEntry>)], inline_max: u64, b: &mut Vec<u8>) {
        if let Some(list) = self.apart.as_ref().map(|a| a.files.clone()).or_else(|| self.apart_files(files, inline_max))
        {
            b.extend_from_slice(APART_TAG);
            b.extend_from_slice(&self.log2.to_le_bytes());
            b.extend_from_slice(&(list.len() as u32).to_le_bytes());
            list.iter().for_each(|f| b.extend_from_slice(&f.to_le_bytes()));
        } else if self.entries().next().is_some() {
            b.extend_from_slice(INLINE_TAG);
            b.extend_from_slice(&self.log2.to_le_bytes());
            b.extend_from_slice(&(self.entries().count() as u64).to_le_bytes());
            for (f, t, sums) in self.entries() {
                b.extend_from_slice(&(f as u32).to_le_bytes());
                b.extend_from_slice(&0u32.to_le_bytes());
                b.extend_from_slice(&(t as u64).to_le_bytes());
                b.extend_from_slice(&(sums.len() as u64).to_le_bytes());
                sums.iter().for_each(|v| b.extend_from_slice(&v.to_le_bytes()));
            }
        }
    }

    /// The contents of `BLOCK_SUMS_FILE` when [`encode`](Self::encode) keeps the inline
    /// checksums apart: every tile's checksums in file then tile order, then the footer.
    pub(super) fn encode_apart(&self, files: &[(String, Vec<TileEntry>)], inline_max: u64) -> Option<Vec<u8>> {
        let list = self.apart_files(files, inline_max)?;
        let mut b = Vec::new();
        for f in list {
            for sums in &self.sums[f as usize] {
                sums.iter().for_each(|v| b.extend_from_slice(&v.to_le_bytes()));
            }
        }
        Some(seal(b, BLOCK_SUMS_MAGIC))
    }

    /// The inline section `BLKS`: every entry names an existing tile and holds exactly as many
    /// checksums as the tile has blocks.
    pub(super) fn decode_inline(r: &mut Reader<'_>, files: &[(String, Vec<TileEntry>)], path: &Path) -> Result<Self> {
        let log2 = decode_log2(r, path)?;
        let count = r.u64()?;
        if count.saturating_mul(24) > r.left() as u64 {
            return Err(Error::corrupt(path, "block checksum count larger than the file"));
        }
        let mut sums: Vec<Vec<Vec<u64>>> = files.iter().map(|(_, t)| vec![Vec::new(); t.len()]).collect();
        for _ in 0..count {
            let (f, _reserved, t, n) = (r.u32()? as usize, r.u32()?, r.u64()?, r.u64()?);
            let entry = files.get(f).and_then(|(_, tiles)| tiles.get(usize::try_from(t).ok()?));
            let Some(entry) = entry else {
                return Err(Error::corrupt(
                    path,
                    format!("block checksums of a tile that does not exist (file {f}, tile {t})"),
                ));
            };
            if n != entry.stored_size.div_ceil(1 << log2) || !wants_blocks(entry.stored_size, log2) {
                return Err(Error::corrupt(
                    path,
                    format!("file {f}, tile {t}: {n} block checksums for {} bytes", entry.stored_size),
                ));
            }
            let slot = &mut sums[f][t as usize];
            if !slot.is_empty() {
                return Err(Error::corrupt(path, format!("file {f}, tile {t}: block checksums given twice")));
            }
            *slot = r.u64s(n)?;
        }
        Ok(Self::inline(log2, sums))
    }

    /// The section `BLKF`: the files (existing, ascending) whose tiles of more than two blocks
    /// have checksums in `BLOCK_SUMS_FILE`, where they follow each other in file then tile
    /// order.
    pub(super) fn decode_apart(r: &mut Reader<'_>, files: &[(String, Vec<TileEntry>)], path: &Path) -> Result<Self> {
        let log2 = decode_log2(r, path)?;
        let count = r.u32()? as usize;
        if count == 0 || count > files.len() {
            return Err(Error::corrupt(path, format!("{count} files with block checksums apart")));
        }
        let list = (0..count).map(|_| r.u32()).collect::<Result<Vec<u32>>>()?;
        if list.windows(2).any(|w| w[0] >= w[1]) || list.last().is_some_and(|&f| f as usize >= files.len()) {
            return Err(Error::corrupt(path, "files with block checksums apart not ascending, or not existing"));
        }
        let mut at: Vec<Vec<(u64, u64)>> = files.iter().map(|(_, t)| vec![(0, 0); t.len()]).collect();
        let mut next = 0u64;
        for &f in &list {
            for (slot, e) in at[f as usize].iter_mut().zip(&files[f as usize].1) {
                if wants_blocks(e.stored_size, log2) {
                    let n = e.stored_size.div_ceil(1 << log2);
                    *slot = (next, n);
                    // Offsets (8 bytes a checksum) must stay representable.
                    next = next.checked_add(n).filter(|&v| v <= u64::MAX / 8).ok_or_else(|| {
                        Error::corrupt(path, format!("file {f}: tile sizes overflow the block checksum file"))
                    })?;
                }
            }
        }
        let loaded = files.iter().map(|(_, t)| (0..t.len()).map(|_| OnceLock::new()).collect()).collect();
        Ok(Self { log2, sums: Vec::new(), apart: Some(Apart { files: list, at, loaded }) })
    }
}

/// The block size of a section, `b` of `2^b`, in its range.
fn decode_log2(r: &mut Reader<'_>, path: &Path) -> Result<u32> {
    let log2 = r.u32()?;
    if !(10..=30).contains(&log2) {
        return Err(Error::corrupt(path, format!("block size 2^{log2} out of range")));
    }
    Ok(log2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::footer::unseal;
    use crate::fragment::blocks::{block_sums, checksum_of_sums};
    use crate::fragment::metadata::FOOTER_MAGIC;
    use crate::fragment::{FragmentMetadata, FragmentName};

    /// A dense fragment of two files: `a0.data` of three unfiltered tiles (5,000 bytes, 1,000
    /// bytes: too small for block checksums, 3,000 bytes) in 1 KiB blocks, `a0.valid` of small
    /// tiles; with the data and the metadata.
    fn sample() -> (FragmentMetadata, Vec<Vec<u8>>) {
        let data: Vec<Vec<u8>> =
            [5000usize, 1000, 3000].iter().map(|&n| (0..n).map(|i| (i * 7 % 251) as u8).collect()).collect();
        let mut offset = 0;
        let mut sums = vec![Vec::new(); 3];
        let tiles = data
            .iter()
            .enumerate()
            .map(|(t, d)| {
                let len = d.len() as u64;
                let checksum = if wants_blocks(len, 10) {
                    sums[t] = block_sums(&[d], 10);
                    checksum_of_sums(&sums[t])
                } else {
                    crate::checksum::xxh3_64(d)
                };
                offset += len;
                TileEntry { offset: offset - len, stored_size: len, unfiltered_size: len, checksum }
            })
            .collect();
        let small = |i: u64| TileEntry { offset: i, stored_size: 1, unfiltered_size: 1, checksum: i };
        let meta = FragmentMetadata {
            name: FragmentName::new(5),
            domain: vec![[0, 2]],
            cell_count: 3,
            files: vec![("a0.data".into(), tiles), ("a0.valid".into(), vec![small(0), small(1), small(2)])],
            sparse: None,
            deletes: None,
            blocks: BlockIndex::inline(10, vec![sums, vec![Vec::new(); 3]]),
            chunks: Default::default(),
            stats: Default::default(),
            packed: false,
        };
        (meta, data)
    }

    fn reader(file: &[u8]) -> impl Fn(u64, u64) -> Result<Bytes> + '_ {
        move |offset, len| {
            let end = offset.checked_add(len).filter(|&e| e <= file.len() as u64);
            end.map(|e| Bytes::from_vec(file[offset as usize..e as usize].to_vec()))
                .ok_or_else(|| Error::corrupt(Path::new(BLOCK_SUMS_FILE), "read past the end"))
        }
    }

    #[test]
    fn the_default_inline_limit_is_the_settings() {
        assert_eq!(crate::config::Config::new().write_inline_block_checksums(), INLINE_BLOCK_SUMS);
    }

    /// Over the inline limit the checksums go to their own file, in file then tile order,
    /// sealed; the metadata names the file's number; reads take each tile's from the file and
    /// check them against the tile checksum. At or under the limit they stay inline.
    #[test]
    fn checksums_over_the_limit_are_kept_apart_and_read_per_tile() {
        let (meta, _) = sample();
        let (inline, none) = meta.encode_with_block_file(8);
        assert!(none.is_none());
        let back = FragmentMetadata::decode(&inline, meta.name.clone(), Path::new("m")).unwrap();
        assert_eq!(back, meta);
        let (bytes, file) = meta.encode_with_block_file(7);
        let file = file.unwrap();
        let payload = unseal(&file, BLOCK_SUMS_MAGIC, Path::new("f")).unwrap();
        let all: Vec<u64> = meta.blocks.sums[0].concat();
        assert_eq!(payload, all.iter().flat_map(|s| s.to_le_bytes()).collect::<Vec<u8>>());
        let back = FragmentMetadata::decode(&bytes, meta.name.clone(), Path::new("m")).unwrap();
        assert!(back.blocks.is_apart() && back.blocks.of(0, 0).is_none());
        assert_eq!([0, 1, 2].map(|t| back.blocks.count(0, t)), [Some(5), None, Some(3)]);
        assert_eq!(back.blocks.count(1, 0), None);
        // Re-encoding a decoded fragment keeps the section as it is.
        assert_eq!(back.encode(), bytes);
        let p = Path::new(BLOCK_SUMS_FILE);
        for t in [2u64, 0, 2] {
            let entry = &back.files[0].1[t as usize];
            let got = back.blocks.sums((0, t), entry, p, reader(payload)).unwrap();
            assert_eq!(got, Some(&meta.blocks.sums[0][t as usize][..]));
        }
        let entry = back.files[0].1[1];
        assert_eq!(back.blocks.sums((0, 1), &entry, p, |_, _| unreachable!()).unwrap(), None);
        // Checksums that do not make the tile checksum, or a file cut short, are corruption.
        let fresh = FragmentMetadata::decode(&bytes, meta.name.clone(), Path::new("m")).unwrap();
        let mut bad = payload.to_vec();
        bad[5 * 8 + 1] ^= 1;
        let e = fresh.blocks.sums((0, 2), &fresh.files[0].1[2], p, reader(&bad)).unwrap_err();
        assert!(e.to_string().contains("file 0, tile 2: block checksums do not match the tile checksum"), "{e}");
        assert!(fresh.blocks.sums((0, 2), &fresh.files[0].1[2], p, reader(&payload[..60])).is_err());
        // Not kept: the good file still reads after the failures.
        assert!(fresh.blocks.sums((0, 2), &fresh.files[0].1[2], p, reader(payload)).unwrap().is_some());
    }

    /// Checksums that do not follow §8.1's rule (a tile of a listed file without them) stay
    /// inline whatever their number.
    #[test]
    fn checksums_off_the_rule_stay_inline() {
        let (mut meta, _) = sample();
        meta.blocks.sums[0][2].clear();
        meta.files[0].1[2].checksum = 9;
        assert!(meta.encode_with_block_file(0).1.is_none());
        let back = FragmentMetadata::decode(&meta.encode_with_block_file(0).0, meta.name.clone(), Path::new("m"));
        assert_eq!(back.unwrap(), meta);
    }

    /// Every malformed `BLKF` section is corruption: a block size out of range, no files, a
    /// file that does not exist, files out of order, the section in metadata of a version
    /// before 9.
    #[test]
    fn malformed_apart_sections_are_corruption() {
        let (meta, _) = sample();
        let bytes = meta.encode_with_block_file(0).0;
        let payload = &bytes[..bytes.len() - 20];
        let at = payload.windows(4).position(|w| w == APART_TAG).unwrap();
        let decode = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut p = payload.to_vec();
            edit(&mut p);
            FragmentMetadata::decode(&seal(p, FOOTER_MAGIC), meta.name.clone(), Path::new("m"))
        };
        assert!(decode(&|_| ()).is_ok());
        type Edit = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(&str, Edit)> = vec![
            ("block size 2^9", Box::new(move |p| p[at + 4] = 9)),
            ("0 files with block checksums apart", Box::new(move |p| p[at + 8] = 0)),
            ("3 files with block checksums apart", Box::new(move |p| p[at + 8] = 3)),
            ("not ascending, or not existing", Box::new(move |p| p[at + 12] = 2)),
            ("unknown or repeated section", Box::new(|p| p[8..12].copy_from_slice(&8u32.to_le_bytes()))),
        ];
        for (want, edit) in cases {
            let e = decode(&*edit).unwrap_err();
            assert!(e.to_string().contains(want), "{want}: {e}");
        }
        // A hostile stored size (bytes 73..81: tile 0's) asks for 2^54 checksums: the read is
        // bounded by the file's size, nothing is allocated for them.
        let huge = decode(&|p| p[73..81].copy_from_slice(&u64::MAX.to_le_bytes())).unwrap();
        assert_eq!(huge.blocks.count(0, 0), Some(1 << 54));
        let file = meta.encode_with_block_file(0).1.unwrap();
        let e = huge.blocks.sums((0, 0), &huge.files[0].1[0], Path::new("f"), reader(&file)).unwrap_err();
        assert!(e.to_string().contains("read past the end"), "{e}");
    }
}
