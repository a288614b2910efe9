//! The sky tiles (SSDB.md section 1): the canonical `tileData` file, its checks, where it is
//! cached, and how it is made when missing.
//!
//! The file is made by the Python recipe `python/tessera/ssdb/tiles.py` (numpy's
//! `default_rng(k)` draws; embedded here and run with a Python that has numpy), because an exact
//! port of numpy's PCG64, normal and Poisson samplers would be a second thing to keep equal to
//! numpy. Whatever its origin, the file is used only if it has the size and sha256 of the spec.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _, Result};
use sha2::{Digest, Sha256};

/// Side of a sky tile (St).
pub const TILE_SIDE: usize = 1000;
/// Period of the tile pattern (P); cells with `x mod P >= St` or `y mod P >= St` are gaps.
pub const PERIOD: i64 = 1024;
/// Number of sky tiles.
pub const TILE_COUNT: usize = 10;
/// Size of the canonical file: a 16-byte header and ten tiles of 1000^2 uint16.
pub const FILE_SIZE: u64 = 16 + (TILE_COUNT * TILE_SIDE * TILE_SIDE * 2) as u64;
/// sha256 of the canonical file.
pub const FILE_SHA256: &str = "d08dc7e4ba3b54db649bd97476ad4509ee36d6de212e757fede37ce2ece67090";
/// The recipe that writes the file (`python -m tessera.ssdb.tiles OUT`).
pub const RECIPE: &str = include_str!("../../../python/tessera/ssdb/tiles.py");

/// The ten sky tiles in memory, tile k row ty at `cells[(k * St + ty) * St ..]`.
#[derive(Debug, Clone)]
pub struct SkyTiles {
    cells: Vec<u16>,
}

impl SkyTiles {
    /// Row `ty` of tile `k`.
    pub fn row(&self, k: usize, ty: usize) -> &[u16] {
        let start = (k * TILE_SIDE + ty) * TILE_SIDE;
        &self.cells[start..start + TILE_SIDE]
    }

    /// Reads and checks `path` (size, sha256, header).
    ///
    /// # Errors
    /// The file cannot be read or is not the canonical one (the error names the path, the size
    /// and the hash found).
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = fs::read(path).with_context(|| format!("reading the sky tiles {}", path.display()))?;
        check(path, &bytes)?;
        let cells = bytes[16..].chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
        Ok(Self { cells })
    }

    /// The tiles from `path` if given, else from the cache (made there first if missing).
    ///
    /// # Errors
    /// As [`SkyTiles::load`] and [`ensure_cached`].
    pub fn open(path: Option<&Path>) -> Result<Self> {
        match path {
            Some(p) => Self::load(p),
            None => Self::load(&ensure_cached()?),
        }
    }
}

/// The sha256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    Sha256::digest(bytes).iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Checks the size, hash and header of a `tileData` file's bytes.
fn check(path: &Path, bytes: &[u8]) -> Result<()> {
    if bytes.len() as u64 != FILE_SIZE {
        bail!("sky tiles {}: {} bytes, expected {FILE_SIZE}", path.display(), bytes.len());
    }
    let hash = sha256_hex(bytes);
    if hash != FILE_SHA256 {
        bail!("sky tiles {}: sha256 {hash}, expected {FILE_SHA256}", path.display());
    }
    let head: Vec<i32> = bytes[..16].chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let want = [TILE_SIDE as i32, TILE_SIDE as i32, PERIOD as i32, PERIOD as i32];
    if head != want {
        bail!("sky tiles {}: header {head:?}, expected {want:?}", path.display());
    }
    Ok(())
}

/// The cache folder: `$TESSERA_SSDB_CACHE`, else `$XDG_CACHE_HOME/tessera-ssdb`, else
/// `$HOME/.cache/tessera-ssdb`, else the system's temporary folder.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TESSERA_SSDB_CACHE") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("tessera-ssdb");
    }
    if let Some(h) = std::env::var_os("HOME") {
        return PathBuf::from(h).join(".cache").join("tessera-ssdb");
    }
    std::env::temp_dir().join("tessera-ssdb")
}

/// The cached `tileData`, written by the recipe first if missing or not canonical.
///
/// # Errors
/// The cache folder cannot be made, no Python with numpy could run the recipe, or its output is
/// not the canonical file (size and hash in the error).
pub fn ensure_cached() -> Result<PathBuf> {
    ensure_cached_with(&[])
}

/// As [`ensure_cached`], trying the Pythons `extra` first.
///
/// # Errors
/// As [`ensure_cached`].
pub fn ensure_cached_with(extra: &[PathBuf]) -> Result<PathBuf> {
    let dir = cache_dir();
    let path = dir.join("tileData");
    if let Ok(bytes) = fs::read(&path) {
        if check(&path, &bytes).is_ok() {
            return Ok(path);
        }
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating the cache folder {}", dir.display()))?;
    generate(&path, extra)?;
    let bytes = fs::read(&path).with_context(|| format!("reading the sky tiles {}", path.display()))?;
    check(&path, &bytes)?;
    Ok(path)
}

/// Pythons to try, in order: `$TESSERA_SSDB_PYTHON`, the `python` next to this executable (the
/// virtualenv `make build` installs `tessera` into), then `python3` on the `PATH`.
fn pythons(extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = extra.to_vec();
    if let Some(p) = std::env::var_os("TESSERA_SSDB_PYTHON") {
        out.push(PathBuf::from(p));
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
        out.push(dir.join("python"));
    }
    out.push(PathBuf::from("python3"));
    out
}

/// Runs the recipe into `out` with the first Python that has numpy.
fn generate(out: &Path, extra: &[PathBuf]) -> Result<()> {
    let mut tried = Vec::new();
    for py in pythons(extra) {
        let has_numpy = Command::new(&py).args(["-c", "import numpy"]).output().map(|o| o.status.success());
        if has_numpy.ok() != Some(true) {
            tried.push(py.display().to_string());
            continue;
        }
        let mut script = tempfile_in(out)?;
        script.1.write_all(RECIPE.as_bytes())?;
        drop(script.1);
        let run = Command::new(&py).arg(&script.0).arg(out).output();
        let _ = fs::remove_file(&script.0);
        let run = run.with_context(|| format!("running {}", py.display()))?;
        if !run.status.success() {
            bail!(
                "the sky tile recipe run by {} failed: {}",
                py.display(),
                String::from_utf8_lossy(&run.stderr).trim()
            );
        }
        return Ok(());
    }
    bail!(
        "the sky tiles are not cached in {} and no Python with numpy was found to make them (tried {}); \
         set TESSERA_SSDB_PYTHON or run `python -m tessera.ssdb.tiles {}`",
        cache_dir().display(),
        tried.join(", "),
        out.display()
    )
}

/// A new file next to `out` for the recipe's script.
fn tempfile_in(out: &Path) -> Result<(PathBuf, fs::File)> {
    let dir = out.parent().unwrap_or_else(|| Path::new("."));
    let path = dir.join(format!("tiles-recipe-{}.py", std::process::id()));
    let f = fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    Ok((path, f))
}

/// The tiles for tests: the cache, made with the workspace's virtualenv Python if needed.
#[cfg(test)]
pub(crate) fn for_tests() -> SkyTiles {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let path = ensure_cached_with(&[venv]).expect("the sky tiles (needs numpy: `make venv`)");
    SkyTiles::load(&path).expect("canonical sky tiles")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recipe_makes_the_canonical_file() {
        let t = for_tests();
        // Spot values of tile 0 and 9 are within uint16 and the background is near 120.
        let mean = t.row(0, 500).iter().map(|&v| f64::from(v)).sum::<f64>() / TILE_SIDE as f64;
        assert!((80.0..400.0).contains(&mean), "row mean {mean}");
        assert_eq!(t.row(9, 999).len(), TILE_SIDE);
    }

    #[test]
    fn bad_files_are_refused_with_their_size_or_hash() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("tileData");
        fs::write(&p, b"short").expect("write");
        let e = SkyTiles::load(&p).expect_err("short file").to_string();
        assert!(e.contains("5 bytes") && e.contains("20000016"), "{e}");
        fs::write(&p, vec![0u8; FILE_SIZE as usize]).expect("write");
        let e = SkyTiles::load(&p).expect_err("zero file").to_string();
        assert!(e.contains("sha256") && e.contains(FILE_SHA256), "{e}");
    }

    #[test]
    fn sha256_of_known_inputs() {
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
