//! The local-file backend: [`LocalStorage`] over `std::fs`. Owns pread and memory-mapped reads
//! (with the per-path cache of maps), buffered appends with fsync on finish, atomic replacement
//! by temporary file + rename + folder fsync, and advisory file locks (`flock` via std). Reads
//! open only regular files, without blocking (a FIFO or device in a file's place is an error,
//! not a hang).

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::mem::MaybeUninit;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use memmap2::Mmap;

use crate::fast_hash::FastMap;
use crate::uninit::write_bytes;

use super::{
    cold_piece_reads, cold_read_pieces, is_temp_name, temp_created_ms, temp_name, Bytes, ImmutableStream, LockGuard,
    LockKind, ReadMode, StagedFile, Storage, StorageError, WriteHandle, COLD_PROBE, STAGED_NAME,
};

/// Size of the write buffer of a file being created: small tiles and metadata are gathered
/// into writes of this size.
const WRITE_BUFFER: usize = 1 << 20;
/// Writes of at least this many bytes bypass the write buffer (after flushing it): a tile of
/// 80 KB copied into the buffer first cost a pass over its bytes, 2.4% of the CPU time of a
/// sparse consolidation of 730 MB.
const DIRECT_WRITE: usize = 64 << 10;

/// Distinguishes the temporary files of concurrent `write_atomic` calls within a process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A cached memory map and the identity of the file it maps.
#[derive(Debug)]
struct CachedMap {
    map: Arc<Mmap>,
    dev: u64,
    ino: u64,
}

/// Local files through `std::fs`.
///
/// In [`ReadMode::Mmap`] each file is mapped once and the map cached by path; reads hand out
/// zero-copy slices of it. Each read still checks (with one `stat`) that the path names the
/// mapped file at the mapped length, so a file replaced by `write_atomic` (in this process or
/// another), removed, or read while still being written is never served stale.
///
/// Immutable files ([`Storage::read_immutable`]) are read without that check: in pread mode
/// through open files kept by path (at most 256), in mmap mode straight from the
/// cached map.
#[derive(Debug, Default)]
pub struct LocalStorage {
    mode: ReadMode,
    maps: Mutex<ByPath<CachedMap>>,
    files: Mutex<ByPath<(Arc<File>, u64)>>,
}

/// Cached maps and open files by path, keyed by the path's bytes: a point read looks its file
/// up once per block it reads, and hashing a `Path` (component by component, with SipHash) was
/// 9% of the CPU of 10,000 warm point reads. The engine spells every path of a file the same
/// way (`paths.rs`), so bytewise equality finds it.
type ByPath<V> = FastMap<OsString, V>;

/// Open files kept for pread reads of immutable files.
pub(crate) const OPEN_FILES: usize = 256;

impl LocalStorage {
    /// A backend reading with `mode`.
    pub fn new(mode: ReadMode) -> Self {
        Self { mode, maps: Mutex::default(), files: Mutex::default() }
    }

    /// The read mode.
    pub fn mode(&self) -> ReadMode {
        self.mode
    }

    fn maps(&self) -> std::sync::MutexGuard<'_, ByPath<CachedMap>> {
        self.maps.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn files(&self) -> std::sync::MutexGuard<'_, ByPath<(Arc<File>, u64)>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops the cached map and open file of `path`.
    fn forget(&self, path: &Path) {
        self.maps().remove(path.as_os_str());
        self.files().remove(path.as_os_str());
    }

    /// Drops the cached maps and open files of `dir` and everything under it.
    fn forget_under(&self, dir: &Path) {
        self.maps().retain(|p, _| !Path::new(p).starts_with(dir));
        self.files().retain(|p, _| !Path::new(p).starts_with(dir));
    }

    /// The open file of an immutable file and its length, opened on first use.
    fn open_immutable(&self, path: &Path) -> Result<(Arc<File>, u64), StorageError> {
        if let Some((f, len)) = self.files().get(path.as_os_str()) {
            return Ok((Arc::clone(f), *len));
        }
        let (file, meta) = open_regular(path)?;
        let len = meta.len();
        let file = Arc::new(file);
        let mut files = self.files();
        if files.len() >= OPEN_FILES {
            // Any one goes: reads of many fragments at once cycle through more than fit anyway.
            if let Some(k) = files.keys().next().cloned() {
                files.remove(&k);
            }
        }
        files.insert(path.as_os_str().to_owned(), (Arc::clone(&file), len));
        Ok((file, len))
    }

    /// Files kept open for immutable reads.
    #[cfg(test)]
    pub(crate) fn open_files(&self) -> usize {
        self.files().len()
    }

    /// The cached map of an immutable file, mapped on first use (`None`: empty file).
    fn map_immutable(&self, path: &Path) -> Result<Option<Arc<Mmap>>, StorageError> {
        let cached = self.maps().get(path.as_os_str()).map(|c| Arc::clone(&c.map));
        match cached {
            Some(m) => Ok(Some(m)),
            None => self.map_and_cache(path),
        }
    }

    fn read_pread(&self, path: &Path, offset: u64, len: Option<u64>) -> Result<Bytes, StorageError> {
        let (file, meta) = open_regular(path)?;
        let size = meta.len();
        let len = len.unwrap_or(size);
        let (_, n) = StorageError::check_range(path, offset, len, size)?;
        let buf =
            read_new_at(&file, n, offset, STREAM_WHOLE_FILES_FROM).map_err(|e| StorageError::io("read", path, e))?;
        Ok(Bytes::from_vec(buf))
    }

    fn read_mmap(&self, path: &Path, offset: u64, len: Option<u64>) -> Result<Bytes, StorageError> {
        let meta = fs::metadata(path).map_err(|e| StorageError::io("stat", path, e))?;
        let cached = {
            let maps = self.maps();
            maps.get(path.as_os_str())
                .filter(|c| c.dev == meta.dev() && c.ino == meta.ino() && c.map.len() as u64 == meta.len())
                .map(|c| Arc::clone(&c.map))
        };
        let map = match cached {
            Some(map) => Some(map),
            None => self.map_and_cache(path)?,
        };
        let size = map.as_ref().map_or(0, |m| m.len() as u64);
        let len = len.unwrap_or(size);
        let (start, n) = StorageError::check_range(path, offset, len, size)?;
        Ok(match map {
            Some(map) => Bytes::from_mmap(map, start, n),
            None => Bytes::default(),
        })
    }

    /// Maps the file at `path` and caches the map; `None` for an empty file (which cannot be
    /// mapped and is not cached).
    fn map_and_cache(&self, path: &Path) -> Result<Option<Arc<Mmap>>, StorageError> {
        let (file, meta) = open_regular(path)?;
        if meta.len() == 0 {
            return Ok(None);
        }
        let map = Arc::new(map_immutable_file(&file).map_err(|e| StorageError::io("mmap", path, e))?);
        self.maps()
            .insert(path.as_os_str().to_owned(), CachedMap { map: Arc::clone(&map), dev: meta.dev(), ino: meta.ino() });
        Ok(Some(map))
    }
}

/// Reads of more bytes than this are large: split into pieces read in parallel when the file's
/// bytes are in the page cache (a large tile then keeps every I/O thread busy, as the kernel's
/// copy out of the page cache runs on the calling thread), read in a sequential ramp when not.
const PARALLEL_READ: usize = 4 << 20;

/// A whole file larger than this (a fragment's metadata with many block checksums) is read
/// from disk as one sequential stream, like a large range: read alone, 2 MB came in 0.9 ms
/// that way against 2.2 ms in one `pread` (the kernel read ahead twice the bytes asked for).
/// Ranges of tiles keep the larger bound: read side by side on the I/O threads, 8 cold 2 MB
/// tiles took 15 ms as one `pread` each, 22 ms as streams.
const STREAM_WHOLE_FILES_FROM: usize = 1 << 20;

/// Reads `n` bytes at `offset` into a new buffer with `pread`, without zeroing the buffer
/// first (a zeroed buffer costs a memset of every byte, then the read overwrites them all).
/// More than `stream_from` bytes (or [`PARALLEL_READ`], the smaller): the first
/// [`COLD_PROBE`] are read without waiting for the disk (`RWF_NOWAIT`, a probe: a larger one
/// starts one large readahead, which costs a cold 10 MB read 11 ms against 6); if the page
/// cache held them, the rest is read in pieces in parallel (more than [`PARALLEL_READ`]) or in
/// one `pread`, else in a sequential ramp from where the probe stopped. A file shorter than
/// `offset + n` is an `UnexpectedEof` error.
#[allow(unsafe_code)]
fn read_new_at(file: &File, n: usize, offset: u64, stream_from: usize) -> std::io::Result<Vec<u8>> {
    use rayon::prelude::*;
    let mut buf: Vec<u8> = Vec::with_capacity(n);
    let spare = &mut buf.spare_capacity_mut()[..n];
    if n > stream_from.min(PARALLEL_READ) {
        // SAFETY: `spare` holds `n > COLD_PROBE` bytes of capacity, ours alone.
        let cached = unsafe { pread_cached(file, spare.as_mut_ptr().cast(), COLD_PROBE, offset)? };
        if cached < COLD_PROBE {
            pread_ramp(file, &mut spare[cached..], offset, cached)?;
        } else if n <= PARALLEL_READ {
            pread_uninit(file, &mut spare[cached..], offset, cached)?;
        } else {
            // The probe's bytes, at the start of piece 0, are not read again.
            let piece = PARALLEL_READ / 2;
            spare.par_chunks_mut(piece).enumerate().try_for_each(|(i, p)| {
                let skip = if i == 0 { cached } else { 0 };
                pread_uninit(file, &mut p[skip..], offset, i * piece + skip)
            })?;
        }
    } else {
        pread_uninit(file, spare, offset, 0)?;
    }
    // SAFETY: `pread_cached` and `pread_uninit` or `pread_ramp` initialized all `n` bytes of the
    // spare capacity between them, or returned an error (and the `?` above left).
    unsafe { buf.set_len(n) };
    Ok(buf)
}

/// Fills `dst` from the bytes at `offset + skip` in the `pread`s of [`cold_read_pieces`]
/// ([`cold_piece_reads`]).
fn pread_ramp(file: &File, dst: &mut [std::mem::MaybeUninit<u8>], offset: u64, skip: usize) -> std::io::Result<()> {
    let mut reads = cold_read_pieces(0, dst.len()).enumerate().flat_map(|(i, r)| cold_piece_reads(r, i == 0));
    reads.try_for_each(|r| pread_uninit(file, &mut dst[r.clone()], offset, skip + r.start))
}

/// Fills the start of the `len` bytes at `dst` with the bytes at `offset` that the page cache
/// holds, without waiting for the disk (`preadv2` with `RWF_NOWAIT`), and returns how many it
/// filled: all `len` when the page cache held them, fewer (often 0) when it did not or the file
/// system does not read without waiting. Off Linux, 0.
///
/// # Safety
/// `dst` must be valid for writes of `len` bytes, held exclusively by the caller.
#[allow(unsafe_code)]
unsafe fn pread_cached(file: &File, dst: *mut u8, len: usize, offset: u64) -> std::io::Result<usize> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let mut done = 0usize;
        while done < len {
            let at = offset
                .checked_add(done as u64)
                .and_then(|o| libc::off_t::try_from(o).ok())
                .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "offset out of range"))?;
            // SAFETY: the caller gives `len` writable bytes at `dst`; the one iovec describes
            // the unfilled part of them, and `preadv2` writes at most that many bytes there.
            let got = unsafe {
                let iov = libc::iovec { iov_base: dst.add(done).cast(), iov_len: len - done };
                libc::preadv2(file.as_raw_fd(), &iov, 1, at, libc::RWF_NOWAIT)
            };
            match got {
                g if g > 0 => done += g.unsigned_abs(),
                0 => break,
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        break;
                    }
                }
            }
        }
        Ok(done)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, dst, len, offset);
        Ok(0)
    }
}

/// Fills `dst` with the bytes at `offset + skip` of `file` (`pread`, retried on short reads and
/// interrupts); a file too short is an `UnexpectedEof` error.
#[allow(unsafe_code)]
fn pread_uninit(file: &File, dst: &mut [std::mem::MaybeUninit<u8>], offset: u64, skip: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut done = 0usize;
    while done < dst.len() {
        let at = offset
            .checked_add((skip + done) as u64)
            .and_then(|o| libc::off_t::try_from(o).ok())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "offset out of range"))?;
        // SAFETY: the pointer and length describe the unfilled part of `dst`, memory we hold
        // exclusively; `pread` writes at most that many bytes there.
        let got = unsafe { libc::pread(file.as_raw_fd(), dst.as_mut_ptr().add(done).cast(), dst.len() - done, at) };
        match got {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            g if g > 0 => done += g.unsigned_abs(),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Maps a finished file read-only.
#[allow(unsafe_code)]
fn map_immutable_file(file: &File) -> std::io::Result<Mmap> {
    // SAFETY: `Mmap::map` is unsafe because the mapped bytes change (or the process gets SIGBUS)
    // if the file is modified or truncated while mapped. Tessera never modifies a file after its
    // `WriteHandle::finish`: fragments and other data files are immutable, and files that are
    // rewritten (`write_atomic`) are replaced by renaming a new inode over the path, which leaves
    // the mapped inode untouched. Only finished files are read, so the mapping stays valid for its
    // lifetime.
    unsafe { Mmap::map(file) }
}

/// Opens `path` for reading if it is a regular file (after symbolic links), else fails with an
/// error saying what it is. The open does not block: a FIFO with no writer, which a plain
/// `open(2)` would wait on forever, or a device is refused from the opened file's own `fstat`
/// (no window in which the path could be swapped between a check and the open), whose
/// metadata comes back with the file.
fn open_regular(path: &Path) -> Result<(File, fs::Metadata), StorageError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| StorageError::io("open", path, e))?;
    let meta = file.metadata().map_err(|e| StorageError::io("stat", path, e))?;
    check_regular(&meta, path)?;
    Ok((file, meta))
}

/// An error unless `meta` describes a regular file.
fn check_regular(meta: &fs::Metadata, path: &Path) -> Result<(), StorageError> {
    let t = meta.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        return Err(StorageError::kind("read", path, std::io::ErrorKind::IsADirectory));
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a file"
    };
    let source = std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("not a regular file ({what})"));
    Err(StorageError::Io { op: "open", path: path.to_path_buf(), source })
}

/// The folder holding `path` (`.` for a bare name).
/// Writes `data` to a new temporary file beside `path` and fsyncs it; returns its path. On error
/// the temporary file is removed (best effort).
fn write_temp(path: &Path, data: &[u8]) -> Result<PathBuf, StorageError> {
    let name = path.file_name().ok_or_else(|| StorageError::kind("write", path, std::io::ErrorKind::InvalidInput))?;
    let tmp = parent_of(path).join(temp_name(&name.to_string_lossy(), TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| StorageError::io("create", &tmp, e))?;
        f.write_all(data).map_err(|e| StorageError::io("write", &tmp, e))?;
        f.sync_all().map_err(|e| StorageError::io("fsync", &tmp, e))
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// A temporary file written and fsynced by `stage_new`: publishing it links it under its name
/// (as `write_new` does, the fsync already done); dropping it removes it.
struct LocalStaged {
    tmp: PathBuf,
}

impl StagedFile for LocalStaged {
    fn publish_new(&self, path: &Path) -> Result<bool, StorageError> {
        match fs::hard_link(&self.tmp, path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(StorageError::io("link", path, e)),
        }
        fsync_dir(parent_of(path))?;
        Ok(true)
    }
}

impl Drop for LocalStaged {
    fn drop(&mut self) {
        // Best effort: a temporary file left behind is invisible to `list_dir`, and vacuum
        // removes it after the grace period.
        let _ = fs::remove_file(&self.tmp);
    }
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn fsync_dir(dir: &Path) -> Result<(), StorageError> {
    // Non-blocking, like `open_regular`: a FIFO in a folder's place fails fsync, not hangs.
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(dir)
        .map_err(|e| StorageError::io("open", dir, e))?;
    f.sync_all().map_err(|e| StorageError::io("fsync", dir, e))
}

/// Bytes a file being written hands to the kernel between two requests to start writing them
/// back to the disk (see [`LocalWriter::start_writeback`]).
const WRITEBACK_STEP: u64 = 8 << 20;

/// A file being written by [`LocalStorage::create`].
struct LocalWriter {
    path: PathBuf,
    out: BufWriter<File>,
    pos: u64,
    /// Bytes whose writeback to the disk has been started.
    writeback: u64,
}

impl LocalWriter {
    /// Asks the kernel to start writing back (not to wait for) what the file received since the
    /// last request, every [`WRITEBACK_STEP`] bytes: the disk then works while the writer
    /// filters and copies the next tiles, and the fsync of `finish` finds little left to write
    /// instead of the whole file. Advisory (Linux `sync_file_range(SYNC_FILE_RANGE_WRITE)`);
    /// a failure here changes nothing, as the fsync reports what matters.
    fn start_writeback(&mut self) {
        let handed = self.pos - self.out.buffer().len() as u64;
        if handed - self.writeback < WRITEBACK_STEP {
            return;
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let (Ok(from), Ok(len)) =
                (libc::off64_t::try_from(self.writeback), libc::off64_t::try_from(handed - self.writeback))
            else {
                return;
            };
            let fd = self.out.get_ref().as_raw_fd();
            // SAFETY: a plain system call on a file descriptor this writer owns; it reads no
            // memory of ours.
            #[allow(unsafe_code)]
            let _ = unsafe { libc::sync_file_range(fd, from, len, libc::SYNC_FILE_RANGE_WRITE) };
        }
        self.writeback = handed;
    }
}

impl WriteHandle for LocalWriter {
    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        if data.len() >= DIRECT_WRITE {
            // Straight to the file: through the buffer, each byte would be copied once more.
            self.out.flush().map_err(|e| StorageError::io("write", &self.path, e))?;
            self.out.get_mut().write_all(data)
        } else {
            self.out.write_all(data)
        }
        .map_err(|e| StorageError::io("write", &self.path, e))?;
        self.pos += data.len() as u64;
        self.start_writeback();
        Ok(())
    }

    fn position(&self) -> u64 {
        self.pos
    }

    fn write_all_vectored(&mut self, parts: &[&[u8]]) -> Result<(), StorageError> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total < DIRECT_WRITE {
            for p in parts {
                self.write_all(p)?;
            }
            return Ok(());
        }
        // Large writes bypass the buffer: flush it, then writev straight from the parts.
        self.out.flush().map_err(|e| StorageError::io("write", &self.path, e))?;
        let file = self.out.get_mut();
        for group in parts.chunks(1024) {
            let mut slices: Vec<std::io::IoSlice<'_>> = group.iter().map(|p| std::io::IoSlice::new(p)).collect();
            let mut rest: &mut [std::io::IoSlice<'_>] = &mut slices;
            while !rest.is_empty() {
                match file.write_vectored(rest) {
                    Ok(0) => {
                        return Err(StorageError::io("write", &self.path, std::io::ErrorKind::WriteZero.into()));
                    }
                    Ok(n) => std::io::IoSlice::advance_slices(&mut rest, n),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(StorageError::io("write", &self.path, e)),
                }
            }
        }
        self.pos += total as u64;
        self.start_writeback();
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<(), StorageError> {
        self.out.flush().map_err(|e| StorageError::io("write", &self.path, e))?;
        self.out.get_ref().sync_all().map_err(|e| StorageError::io("fsync", &self.path, e))
    }
}

/// A stream of reads of one immutable file through a descriptor of its own.
struct LocalStream {
    file: File,
    len: u64,
    path: PathBuf,
}

impl ImmutableStream for LocalStream {
    fn read_into(&mut self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> Result<(), StorageError> {
        StorageError::check_range(&self.path, offset, buf.len() as u64, self.len)?;
        pread_uninit(&self.file, buf, offset, 0).map_err(|e| StorageError::io("read", &self.path, e))
    }
}

impl Storage for LocalStorage {
    fn read_range(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        match self.mode {
            ReadMode::Pread => self.read_pread(path, offset, Some(len)),
            ReadMode::Mmap => self.read_mmap(path, offset, Some(len)),
        }
    }

    fn read_range_into(&self, path: &Path, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        if self.mode == ReadMode::Mmap {
            let b = self.read_mmap(path, offset, Some(buf.len() as u64))?;
            buf.copy_from_slice(&b);
            return Ok(());
        }
        let (file, meta) = open_regular(path)?;
        let size = meta.len();
        StorageError::check_range(path, offset, buf.len() as u64, size)?;
        file.read_exact_at(buf, offset).map_err(|e| StorageError::io("read", path, e))
    }

    fn read_immutable(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        if self.mode == ReadMode::Mmap {
            let map = self.map_immutable(path)?;
            let size = map.as_ref().map_or(0, |m| m.len() as u64);
            let (start, n) = StorageError::check_range(path, offset, len, size)?;
            return Ok(match map {
                Some(map) => Bytes::from_mmap(map, start, n),
                None => Bytes::default(),
            });
        }
        let (file, size) = self.open_immutable(path)?;
        let (_, n) = StorageError::check_range(path, offset, len, size)?;
        let buf = read_new_at(&file, n, offset, PARALLEL_READ).map_err(|e| StorageError::io("read", path, e))?;
        Ok(Bytes::from_vec(buf))
    }

    fn read_immutable_into(&self, path: &Path, offset: u64, buf: &mut [MaybeUninit<u8>]) -> Result<(), StorageError> {
        if self.mode == ReadMode::Mmap {
            let map = self.map_immutable(path)?;
            let size = map.as_ref().map_or(0, |m| m.len() as u64);
            let (start, n) = StorageError::check_range(path, offset, buf.len() as u64, size)?;
            if let Some(map) = map {
                write_bytes(buf, &map[start..start + n]);
            }
            return Ok(());
        }
        let (file, size) = self.open_immutable(path)?;
        StorageError::check_range(path, offset, buf.len() as u64, size)?;
        pread_uninit(&file, buf, offset, 0).map_err(|e| StorageError::io("read", path, e))
    }

    fn read_immutable_cached(
        &self,
        path: &Path,
        offset: u64,
        buf: &mut [MaybeUninit<u8>],
    ) -> Result<Option<usize>, StorageError> {
        if self.mode == ReadMode::Mmap {
            return Ok(None);
        }
        let (file, size) = self.open_immutable(path)?;
        StorageError::check_range(path, offset, buf.len() as u64, size)?;
        let len = buf.len();
        // SAFETY: `buf` is memory we hold exclusively, `len` bytes long; `pread_cached` writes at
        // most `len` bytes into it.
        #[allow(unsafe_code)]
        let got = unsafe { pread_cached(&file, buf.as_mut_ptr().cast(), len, offset) }
            .map_err(|e| StorageError::io("read", path, e))?;
        Ok(Some(got))
    }

    fn immutable_stream(&self, path: &Path) -> Result<Option<Box<dyn ImmutableStream>>, StorageError> {
        if self.mode == ReadMode::Mmap {
            return Ok(None);
        }
        let (file, meta) = open_regular(path)?;
        let len = meta.len();
        Ok(Some(Box::new(LocalStream { file, len, path: path.to_path_buf() })))
    }

    fn read_all(&self, path: &Path) -> Result<Bytes, StorageError> {
        match self.mode {
            ReadMode::Pread => self.read_pread(path, 0, None),
            ReadMode::Mmap => self.read_mmap(path, 0, None),
        }
    }

    fn file_size(&self, path: &Path) -> Result<u64, StorageError> {
        let meta = fs::metadata(path).map_err(|e| StorageError::io("stat", path, e))?;
        check_regular(&meta, path)?;
        Ok(meta.len())
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| StorageError::io("create", path, e))?;
        self.forget(path);
        Ok(Box::new(LocalWriter {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(WRITE_BUFFER, file),
            pos: 0,
            writeback: 0,
        }))
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) -> Result<(), StorageError> {
        let dir = parent_of(path);
        let tmp = write_temp(path, data)?;
        if let Err(e) = fs::rename(&tmp, path) {
            // Best effort: the temporary file is invisible to `list_dir` anyway.
            let _ = fs::remove_file(&tmp);
            return Err(StorageError::Io { op: "rename", path: path.to_path_buf(), source: e });
        }
        self.forget(path);
        fsync_dir(dir)
    }

    fn write_new(&self, path: &Path, data: &[u8]) -> Result<bool, StorageError> {
        // A hard link fails if the name exists: create-if-absent with the content in place.
        LocalStaged { tmp: write_temp(path, data)? }.publish_new(path)
    }

    fn stage_new(&self, dir: &Path, data: &[u8]) -> Result<Option<Box<dyn StagedFile>>, StorageError> {
        let tmp = write_temp(&dir.join(STAGED_NAME), data)?;
        Ok(Some(Box::new(LocalStaged { tmp })))
    }

    fn list_temps(&self, dir: &Path) -> Result<Vec<(String, Option<u64>)>, StorageError> {
        let entries = fs::read_dir(dir).map_err(|e| StorageError::io("list_dir", dir, e))?;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StorageError::io("list_dir", dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_temp_name(&name) {
                continue;
            }
            // Names written before format 3 carry no time: take the file's modification time.
            let created = temp_created_ms(&name).or_else(|| {
                let modified = entry.metadata().ok()?.modified().ok()?;
                let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
                u64::try_from(since.as_millis()).ok()
            });
            out.push((name, created));
        }
        out.sort_unstable();
        Ok(out)
    }

    fn create_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        fs::create_dir_all(path).map_err(|e| StorageError::Io {
            op: "create_dir_all",
            path: path.to_path_buf(),
            source: e,
        })
    }

    fn sync_dir(&self, path: &Path) -> Result<(), StorageError> {
        fsync_dir(path)
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>, StorageError> {
        let entries = fs::read_dir(path).map_err(|e| StorageError::io("list_dir", path, e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StorageError::io("list_dir", path, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_temp_name(&name) {
                names.push(name);
            }
        }
        names.sort_unstable();
        Ok(names)
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }

    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        self.forget(path);
        fs::remove_file(path).map_err(|e| StorageError::io("remove_file", path, e))
    }

    fn remove_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        self.forget_under(path);
        fs::remove_dir_all(path).map_err(|e| StorageError::io("remove_dir_all", path, e))
    }

    fn lock(&self, path: &Path, kind: LockKind, wait: bool) -> Result<LockGuard, StorageError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StorageError::io("open lock", path, e))?;
        let result = match (kind, wait) {
            (LockKind::Exclusive, true) => file.lock().map_err(std::fs::TryLockError::Error),
            (LockKind::Shared, true) => file.lock_shared().map_err(std::fs::TryLockError::Error),
            (LockKind::Exclusive, false) => file.try_lock(),
            (LockKind::Shared, false) => file.try_lock_shared(),
        };
        match result {
            // Closing the file (dropping the guard) releases the lock.
            Ok(()) => Ok(LockGuard::new(Box::new(file))),
            Err(std::fs::TryLockError::WouldBlock) => Err(StorageError::WouldBlock { path: path.to_path_buf() }),
            Err(std::fs::TryLockError::Error(e)) => Err(StorageError::io("lock", path, e)),
        }
    }

    fn modified_ms(&self, path: &Path) -> Result<u64, StorageError> {
        newest_mtime(path).map_err(|e| StorageError::io("modified time", path, e))
    }
}

/// The modification time of a file, or the newest of a folder's entries (recursively) and the
/// folder itself, in milliseconds since the epoch.
fn newest_mtime(path: &Path) -> std::io::Result<u64> {
    let meta = fs::metadata(path)?;
    let ms = |m: &fs::Metadata| -> std::io::Result<u64> {
        let t = m.modified()?.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Ok(u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
    };
    let mut newest = ms(&meta)?;
    if meta.is_dir() {
        for entry in fs::read_dir(path)? {
            match newest_mtime(&entry?.path()) {
                Ok(t) => newest = newest.max(t),
                // Removed while being walked.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(newest)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes below and above the direct-write size, plain and vectored, in any mix, land in
    /// order with the positions counted, whether they pass through the buffer or bypass it.
    #[test]
    fn buffered_and_direct_writes_interleave_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes = |n: usize, seed: u8| -> Vec<u8> { (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect() };
        let parts: Vec<Vec<u8>> = vec![
            bytes(10, 1),
            bytes(DIRECT_WRITE, 2),
            bytes(3, 3),
            bytes(DIRECT_WRITE - 1, 4),
            bytes(5 * DIRECT_WRITE + 7, 5),
            bytes(WRITE_BUFFER + 1, 6),
            bytes(1, 7),
        ];
        let storage = LocalStorage::new(ReadMode::Pread);
        let mut w = storage.create(&path).unwrap();
        let mut expected = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(w.position(), expected.len() as u64);
            if i % 2 == 0 {
                w.write_all(p).unwrap();
            } else {
                let (a, b) = p.split_at(p.len() / 3);
                w.write_all_vectored(&[a, b]).unwrap();
            }
            expected.extend_from_slice(p);
        }
        assert_eq!(w.position(), expected.len() as u64);
        w.finish().unwrap();
        assert_eq!(fs::read(&path).unwrap(), expected);
    }

    /// A large read of a file whose pages were dropped from the page cache (flushed, then
    /// `posix_fadvise(DONTNEED)`) takes the sequential ramp from wherever the probe stopped, and
    /// returns exactly the bytes asked for, at either streaming bound; the probe reports what
    /// the page cache held.
    #[test]
    fn read_new_at_from_disk_reads_exactly() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..9_000_011u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        file.sync_all().unwrap();
        let cases = [(data.len(), 0), (4_500_003, 4_000_000), (PARALLEL_READ + 1, 12_345), (2_000_001, 7)];
        for ((n, offset), stream_from) in
            cases.into_iter().flat_map(|c| [(c, PARALLEL_READ), (c, STREAM_WHOLE_FILES_FROM)])
        {
            // SAFETY: a plain system call on a file we opened; it reads no memory of ours.
            #[allow(unsafe_code)]
            let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            let mut probe = vec![0u8; COLD_PROBE];
            // SAFETY: `probe` holds `COLD_PROBE` bytes, ours alone.
            #[allow(unsafe_code)]
            let got = unsafe { pread_cached(&file, probe.as_mut_ptr(), COLD_PROBE, offset as u64) }.unwrap();
            assert_eq!(probe[..got], data[offset..offset + got]);
            assert_eq!(read_new_at(&file, n, offset as u64, stream_from).unwrap(), data[offset..offset + n]);
        }
    }

    /// `read_new_at` returns exactly the bytes asked for, at any offset and across a read of
    /// several MiB (in parallel pieces), and refuses a range past the end instead of returning a short buffer.
    #[test]
    fn read_new_at_reads_exactly_or_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..4_999_993u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        assert_eq!(read_new_at(&file, data.len(), 0, PARALLEL_READ).unwrap(), data);
        assert_eq!(read_new_at(&file, 1000, 4_000_001, PARALLEL_READ).unwrap(), data[4_000_001..4_001_001]);
        assert_eq!(read_new_at(&file, 4_500_003, 499_990, PARALLEL_READ).unwrap(), data[499_990..]);
        assert_eq!(
            read_new_at(&file, 4_500_004, 499_990, PARALLEL_READ).unwrap_err().kind(),
            std::io::ErrorKind::UnexpectedEof
        );
        assert!(read_new_at(&file, 0, 7, PARALLEL_READ).unwrap().is_empty());
        let e = read_new_at(&file, 10, data.len() as u64 - 5, PARALLEL_READ).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(read_new_at(&file, 1, u64::MAX, PARALLEL_READ).is_err());
    }
}
