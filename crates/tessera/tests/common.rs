//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;

use tessera::*;

pub fn mem_ctx() -> Context {
    let mut c = Config::new();
    c.set("sm.compute_concurrency", "2").unwrap();
    Context::with_storage(c, Arc::new(MemoryStorage::new())).unwrap()
}

/// In memory, with the update index of small fragments built for any number of them (`index`)
/// (from the first read of an open array) or never, so model tests check reads both ways.
pub fn mem_ctx_indexed(index: bool) -> Context {
    let mut c = Config::new();
    c.set("sm.compute_concurrency", "2").unwrap();
    set_update_index(&mut c, index);
    Context::with_storage(c, Arc::new(MemoryStorage::new())).unwrap()
}

fn set_update_index(config: &mut Config, index: bool) {
    if index {
        config.set("sm.read.update_index_min_fragments", "1").unwrap();
        config.set("sm.read.update_index_after_reads", "0").unwrap();
    } else {
        config.set("sm.read.update_index_size", "0").unwrap();
    }
}

pub fn local_ctx() -> Context {
    Context::new(Config::new()).unwrap()
}

/// Local files in read mode `mode`, a tile cache of `cache` bytes (none, small enough that only
/// some tiles go through it, or the default) and tiny coalescing limits and memory budget (so
/// reads split and merge), with or without the update index (see `mem_ctx_indexed`): the model
/// tests' local configuration. The budget is `budget` bytes: no smaller than the largest tile a
/// read needs (reads needing a larger one are refused), so batches hold as few tiles as they can.
pub fn local_model_ctx(mode: &str, cache: &str, index: bool, budget: u64) -> Context {
    let mut config = Config::new();
    set_update_index(&mut config, index);
    config.set("vfs.read_mode", mode).unwrap();
    config.set("sm.tile_cache_size", cache).unwrap();
    config.set("vfs.coalesce_gap", "16").unwrap();
    config.set("vfs.coalesce_max", "200").unwrap();
    config.set("sm.memory_budget", &budget.max(300).to_string()).unwrap();
    Context::new(config).unwrap()
}

pub fn dim(name: &str, lo: i128, hi: i128, tile: u64) -> Dimension {
    Dimension::new(name, Datatype::Int64, (lo, hi), tile)
}

pub fn i32_bytes(v: &[i32]) -> &[u8] {
    bytemuck::cast_slice(v)
}

pub fn as_i32(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// A 2-D int32 array `rows x cols` with tiles `tr x tc`.
pub fn schema_2d(rows: i128, cols: i128, tr: u64, tc: u64) -> ArraySchema {
    ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 1, rows, tr))
        .dim(dim("c", 1, cols, tc))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap()
}

/// Coordinates of one cell, one per dimension.
pub type Coord = Vec<i128>;

/// Every cell and tile order: row-major, col-major, and the Z and Hilbert curves.
pub fn order_strategy() -> impl Strategy<Value = CellOrder> {
    prop_oneof![Just(CellOrder::RowMajor), Just(CellOrder::ColMajor), Just(CellOrder::Z), Just(CellOrder::Hilbert)]
}

/// Bits that number `count` things (docs/format.md §5.1).
pub fn bit_width(count: u64) -> u32 {
    64 - count.saturating_sub(1).leading_zeros()
}

/// Sorts tile coordinates `tiles` (normalized, one per dimension) into a curve `order`
/// over `counts` tiles per dimension; row- and col-major leave them as they are.
pub fn sort_tiles_by_curve(tiles: &mut [Vec<u64>], order: CellOrder, counts: &[u64]) {
    if !matches!(order, CellOrder::Z | CellOrder::Hilbert) {
        return;
    }
    let widths: Vec<u32> = counts.iter().map(|&c| bit_width(c)).collect();
    tiles.sort_by_key(|t| curve_key(order, &widths, t).expect("a key of a valid schema"));
}

pub fn layout_strategy() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::RowMajor), Just(Layout::ColMajor), Just(Layout::Global)]
}

/// Enumerates the cross product of `lists` in row- or col-major order.
pub fn enumerate_box(lists: &[Vec<i128>], order: CellOrder) -> Vec<Coord> {
    let n = lists.len();
    let mut out = Vec::new();
    if lists.iter().any(Vec::is_empty) {
        return out;
    }
    let mut idx = vec![0usize; n];
    let fastest_first: Vec<usize> = match order {
        CellOrder::ColMajor => (0..n).collect(),
        _ => (0..n).rev().collect(),
    };
    loop {
        out.push((0..n).map(|d| lists[d][idx[d]]).collect());
        let mut moved = false;
        for &d in &fastest_first {
            idx[d] += 1;
            if idx[d] < lists[d].len() {
                moved = true;
                break;
            }
            idx[d] = 0;
        }
        if !moved {
            return out;
        }
    }
}

/// Where [`Hooked`] calls its hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// Before `write_atomic` or `write_new` of the path.
    BeforeWrite,
    /// After `list_dir` of the path (before the listing is returned).
    AfterList,
    /// Before `read_range` (with its offset and length) or `read_all` (`None`) of the path,
    /// which every other read of the trait's defaults goes through, and before each read of a
    /// stream of the path (a test counts one context's reads with it, or looks at their pattern).
    Read(Option<(u64, u64)>),
}

/// What [`Hooked`] calls at each [`Hook`].
pub type HookFn = Arc<dyn Fn(Hook, &Path) + Send + Sync>;

/// A storage that delegates to `inner` and calls `hook` at the points of [`Hook`]: the tests
/// that make one interleaving of two processes happen every time run the other process there.
/// With `cached: Some(n)` it reports only the first `n` bytes of any range as held in memory
/// ([`Storage::read_immutable_cached`]), as a local disk whose page cache was dropped does:
/// reads then take their from-disk paths every time, whatever the page cache holds.
pub struct Hooked {
    pub inner: Arc<dyn Storage>,
    pub hook: HookFn,
    pub cached: Option<usize>,
}

impl std::fmt::Debug for Hooked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hooked({:?})", self.inner)
    }
}

/// A stream of a [`Hooked`] storage: calls the hook before each read.
struct HookedStream {
    inner: Box<dyn ImmutableStream>,
    hook: HookFn,
    path: PathBuf,
}

impl ImmutableStream for HookedStream {
    fn read_into(
        &mut self,
        offset: u64,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> std::result::Result<(), StorageError> {
        (self.hook)(Hook::Read(Some((offset, buf.len() as u64))), &self.path);
        self.inner.read_into(offset, buf)
    }
}

impl Storage for Hooked {
    fn read_range(&self, path: &Path, offset: u64, len: u64) -> std::result::Result<Bytes, StorageError> {
        (self.hook)(Hook::Read(Some((offset, len))), path);
        self.inner.read_range(path, offset, len)
    }
    fn read_immutable_cached(
        &self,
        path: &Path,
        offset: u64,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> std::result::Result<Option<usize>, StorageError> {
        let Some(cached) = self.cached else { return self.inner.read_immutable_cached(path, offset, buf) };
        let n = cached.min(buf.len());
        self.inner.read_immutable_into(path, offset, &mut buf[..n])?;
        Ok(Some(n))
    }
    fn immutable_stream(&self, path: &Path) -> std::result::Result<Option<Box<dyn ImmutableStream>>, StorageError> {
        let Some(inner) = self.inner.immutable_stream(path)? else { return Ok(None) };
        Ok(Some(Box::new(HookedStream { inner, hook: Arc::clone(&self.hook), path: path.to_path_buf() })))
    }
    fn read_all(&self, path: &Path) -> std::result::Result<Bytes, StorageError> {
        (self.hook)(Hook::Read(None), path);
        self.inner.read_all(path)
    }
    fn file_size(&self, path: &Path) -> std::result::Result<u64, StorageError> {
        self.inner.file_size(path)
    }
    fn create(&self, path: &Path) -> std::result::Result<Box<dyn WriteHandle>, StorageError> {
        self.inner.create(path)
    }
    fn write_atomic(&self, path: &Path, data: &[u8]) -> std::result::Result<(), StorageError> {
        (self.hook)(Hook::BeforeWrite, path);
        self.inner.write_atomic(path, data)
    }
    fn write_new(&self, path: &Path, data: &[u8]) -> std::result::Result<bool, StorageError> {
        (self.hook)(Hook::BeforeWrite, path);
        self.inner.write_new(path, data)
    }
    fn list_temps(&self, dir: &Path) -> std::result::Result<Vec<(String, Option<u64>)>, StorageError> {
        self.inner.list_temps(dir)
    }
    fn create_dir_all(&self, path: &Path) -> std::result::Result<(), StorageError> {
        self.inner.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> std::result::Result<(), StorageError> {
        self.inner.sync_dir(path)
    }
    fn list_dir(&self, path: &Path) -> std::result::Result<Vec<String>, StorageError> {
        let listing = self.inner.list_dir(path)?;
        (self.hook)(Hook::AfterList, path);
        Ok(listing)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }
    fn is_file(&self, path: &Path) -> bool {
        self.inner.is_file(path)
    }
    fn remove_file(&self, path: &Path) -> std::result::Result<(), StorageError> {
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> std::result::Result<(), StorageError> {
        self.inner.remove_dir_all(path)
    }
    fn lock(&self, path: &Path, kind: LockKind, wait: bool) -> std::result::Result<LockGuard, StorageError> {
        self.inner.lock(path, kind, wait)
    }
}

/// Where cells of a dense array go: each dimension's (domain start, tile extent, domain size)
/// and the orders.
pub struct GridOrder {
    pub dims: Vec<(i128, u64, u64)>,
    pub cell_order: CellOrder,
    pub tile_order: CellOrder,
}

impl GridOrder {
    /// The cells of rectangle `w` in the array's global order (tiles in tile order, cells of a
    /// tile in cell order; the global layout of a dense array gives the cells of a tile whose
    /// cell order is a curve row-major, docs/format.md §5.1).
    pub fn global_order(&self, w: &[(i128, i128)]) -> Vec<Coord> {
        let tile_lists: Vec<Vec<i128>> = w
            .iter()
            .zip(&self.dims)
            .map(|(&(a, b), &(lo, t, _))| ((a - lo) / i128::from(t)..=(b - lo) / i128::from(t)).collect())
            .collect();
        let mut tiles = enumerate_box(&tile_lists, self.tile_order);
        let counts: Vec<u64> = self.dims.iter().map(|&(_, t, size)| size.div_ceil(t)).collect();
        let mut as_u64: Vec<Vec<u64>> = tiles.iter().map(|t| t.iter().map(|&x| x as u64).collect()).collect();
        sort_tiles_by_curve(&mut as_u64, self.tile_order, &counts);
        if self.tile_order.is_curve() {
            tiles = as_u64.iter().map(|t| t.iter().map(|&x| i128::from(x)).collect()).collect();
        }
        let cell_order = if self.cell_order.is_curve() { CellOrder::RowMajor } else { self.cell_order };
        let mut out = Vec::new();
        for tc in tiles {
            let lists: Vec<Vec<i128>> = tc
                .iter()
                .zip(w)
                .zip(&self.dims)
                .map(|((&t, &(a, b)), &(lo, ext, _))| {
                    let t0 = lo + t * i128::from(ext);
                    (a.max(t0)..=b.min(t0 + i128::from(ext) - 1)).collect()
                })
                .collect();
            out.extend(enumerate_box(&lists, cell_order));
        }
        out
    }

    /// The cells of a multi-range subarray in the order `layout` returns them (global order
    /// takes one range per dimension).
    pub fn cells_in_layout(&self, ranges: &[Vec<(i128, i128)>], layout: Layout) -> Vec<Coord> {
        match layout {
            Layout::Global => self.global_order(&ranges.iter().map(|r| r[0]).collect::<Vec<_>>()),
            _ => {
                let lists: Vec<Vec<i128>> =
                    ranges.iter().map(|rs| rs.iter().flat_map(|&(a, b)| a..=b).collect()).collect();
                let order = if layout == Layout::RowMajor { CellOrder::RowMajor } else { CellOrder::ColMajor };
                enumerate_box(&lists, order)
            }
        }
    }
}

/// Random conditions on the model tests' attributes: `a` (int32) compared with literals in
/// `lo..hi` (or between two of them), `v` (nullable) null or not, under `and`, `or`, `not`.
pub fn cond_strategy(lo: i32, hi: i32) -> impl Strategy<Value = Condition> {
    let op = prop_oneof![
        Just(CmpOp::Lt),
        Just(CmpOp::Le),
        Just(CmpOp::Gt),
        Just(CmpOp::Ge),
        Just(CmpOp::Eq),
        Just(CmpOp::Ne)
    ];
    let leaf = prop_oneof![
        3 => (op, lo..hi).prop_map(|(op, v)| Condition::Cmp { attr: "a".into(), op, value: v.into() }),
        1 => (lo..hi, lo..hi).prop_map(|(x, y)| Condition::attr("a").between(x.min(y), x.max(y))),
        1 => any::<bool>().prop_map(|null| Condition::IsNull { attr: "v".into(), null }),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(x, y)| x.and(y)),
            (inner.clone(), inner.clone()).prop_map(|(x, y)| x.or(y)),
            inner.prop_map(|x| !x),
        ]
    })
}

/// The reference of `cond_strategy`'s conditions on one cell (no unknowns: `a` is never null).
pub fn cond_holds(c: &Condition, a: i32, v_null: bool) -> bool {
    let a = i128::from(a);
    let lit = |v: &ConditionValue| match v {
        ConditionValue::Int(x) => *x,
        other => panic!("{other:?}"),
    };
    match c {
        Condition::Cmp { op, value, .. } => {
            let v = lit(value);
            match op {
                CmpOp::Lt => a < v,
                CmpOp::Le => a <= v,
                CmpOp::Gt => a > v,
                CmpOp::Ge => a >= v,
                CmpOp::Eq => a == v,
                _ => a != v,
            }
        }
        Condition::Between { lo, hi, .. } => lit(lo) <= a && a <= lit(hi),
        Condition::IsNull { null, .. } => v_null == *null,
        Condition::And(x, y) => cond_holds(x, a as i32, v_null) && cond_holds(y, a as i32, v_null),
        Condition::Or(x, y) => cond_holds(x, a as i32, v_null) || cond_holds(y, a as i32, v_null),
        Condition::Not(x) => !cond_holds(x, a as i32, v_null),
        other => panic!("{other:?}"),
    }
}

/// Where the tiles of file entry `file` of fragment `name` of the array at `uri` are stored: the
/// file (the packed file of a packed fragment, docs/format.md §8.4) and the entry's tiles.
pub fn stored_file(uri: &Path, name: &FragmentName, file: &str) -> (std::path::PathBuf, Vec<TileEntry>) {
    let dir = uri.join(FRAGMENTS_DIR).join(name.to_string());
    let meta_path = dir.join(METADATA_FILE);
    let meta = FragmentMetadata::decode(&std::fs::read(&meta_path).unwrap(), name.clone(), &meta_path).unwrap();
    let tiles = meta.file(file).unwrap_or_else(|| panic!("no file entry {file}")).to_vec();
    (dir.join(meta.stored_file(file)), tiles)
}

/// Flips bits `mask` of byte `at` of file entry `file` of fragment `name`, `at` counted in its
/// tiles' stored bytes in tile order (as an unpacked file holds them), wherever they are stored.
/// Returns the stored file's name, which errors about the byte name.
pub fn flip_stored(uri: &Path, name: &FragmentName, file: &str, at: u64, mask: u8) -> String {
    let (path, tiles) = stored_file(uri, name, file);
    let mut rest = at;
    let tile = tiles.iter().find(|t| {
        let here = rest < t.stored_size;
        if !here {
            rest -= t.stored_size;
        }
        here
    });
    let t = tile.unwrap_or_else(|| panic!("byte {at} is past the tiles of {file}"));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(t.offset + rest) as usize] ^= mask;
    std::fs::write(&path, &bytes).unwrap();
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// The name of fragment `frag`'s folder, from its path.
pub fn fragment_name_of(frag: &Path) -> FragmentName {
    FragmentName::parse(frag.file_name().unwrap().to_str().unwrap()).unwrap()
}

/// Local files with no tile cache, on a storage reporting only the first `cached` bytes of any
/// range as in memory ([`Hooked`]; `usize::MAX`: all of it): reads take their from-disk paths
/// (0), their in-memory ones, or start from memory and go on from disk.
pub fn cached_ctx(cached: usize) -> Context {
    let inner: Arc<dyn Storage> = Arc::new(LocalStorage::new(ReadMode::Pread));
    let mut config = Config::new();
    config.set("sm.tile_cache_size", "0").unwrap();
    Context::with_storage(config, Arc::new(Hooked { inner, hook: Arc::new(|_, _| {}), cached: Some(cached) })).unwrap()
}

/// Point reads `(r, c)` of int32 attribute `a` of the 2-D array at `uri`, opened in `ctx`.
pub fn points_rc(ctx: &Context, uri: &Path, pts: &[(i64, i64)]) -> tessera::Result<Vec<i32>> {
    let r = Array::open(ctx, uri, Mode::Read)?;
    let (rs, cs): (Vec<i64>, Vec<i64>) = pts.iter().copied().unzip();
    let res = r.read_points(
        &[
            CoordInput { name: "r", data: bytemuck::cast_slice(&rs) },
            CoordInput { name: "c", data: bytemuck::cast_slice(&cs) },
        ],
        &["a"],
    )?;
    Ok(as_i32(&res.attrs[0].data))
}
