//! Cold caches between query runs (SSDB.md §5: "clear OS caches and reopen the store"): every
//! file under the store is evicted from the OS page cache with
//! `posix_fadvise(POSIX_FADV_DONTNEED)` (the `libc` crate). The engine's own caches (tile cache,
//! open files, maps) live in its `Context`, which the caller drops and makes anew.
//!
//! DONTNEED drops clean pages only. Every file the engine writes is fsynced when finished
//! (`LocalStorage`), so the store holds no dirty pages by the time a run evicts it; an fsync per
//! file per run here cost minutes on micro's ~1000 files (270 evictions) and is not done.

use std::fs::File;
use std::io;
use std::path::Path;

/// Evicts every file under `dir` (recursively) from the page cache; returns the number of
/// files advised.
///
/// # Errors
/// A folder or file that cannot be listed or opened.
pub fn evict_dir(dir: &Path) -> io::Result<u64> {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let ty = e.file_type()?;
            if ty.is_dir() {
                stack.push(e.path());
            } else if ty.is_file() {
                drop_pages(&File::open(e.path())?)?;
                n += 1;
            }
        }
    }
    Ok(n)
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn drop_pages(f: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is open for the duration of the call (borrowed from `f`);
    // posix_fadvise only reads its arguments and touches no memory of ours.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

#[cfg(not(target_os = "linux"))]
fn drop_pages(_f: &File) -> io::Result<()> {
    Ok(())
}
