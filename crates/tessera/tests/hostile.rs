//! Hostile bytes on disk: tiles, offsets and files crafted to be wrong in ways checksums do not
//! catch (the checksums are recomputed) or to be something other than a regular file. Each read
//! returns a clear error naming the file and tile, and never hangs, panics or returns garbage.

use std::path::Path;

use crate::common::*;
use crate::tamper::{drop_record_copies, frag_dir, replace_tile};
use tessera::*;

/// A sparse 1-D array with one unfiltered, variable-length `utf8` attribute `s`, holding the
/// cells 1..=4 with values "aa", "bb", "cc", "dd" in one data tile.
fn sparse_var_array(ctx: &Context, uri: &Path) -> FragmentName {
    let mut s = Attribute::new("s", Datatype::Utf8);
    s.cell_val_num = CellValNum::Var;
    let schema = ArraySchema::builder(ArrayType::Sparse).dim(dim("x", 1, 100, 100)).attr(s).build().unwrap();
    Array::create(ctx, uri, &schema).unwrap();
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    let xs: Vec<i64> = vec![1, 2, 3, 4];
    let offsets = [0u64, 2, 4, 6];
    w.write_sparse(
        &[CoordInput { name: "x", data: bytemuck::cast_slice(&xs) }],
        &[AttrInput { name: "s", data: b"aabbccdd", offsets: Some(&offsets), validity: None }],
    )
    .unwrap()
}

fn offsets_tile(offs: &[u64]) -> Vec<u8> {
    offs.iter().flat_map(|o| o.to_le_bytes()).collect()
}

/// Every offset of a sparse variable-length tile is checked, not only the ends of the run of
/// cells read: decreasing, huge or shifted offsets inside the run are corruption of that file
/// and tile, whether the read takes all cells or a run in the middle.
#[test]
fn sparse_var_offsets_inside_a_run_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = local_ctx();
    for (k, bad) in [
        vec![0u64, 5, 1, 6],     // decreasing inside the run
        vec![0, 1 << 40, 4, 6],  // huge inside the run
        vec![2, 1, 4, 6],        // the first offset past the second (shifted)
        vec![1, 2, 4, 6],        // does not start at 0
        vec![0, 2, 4, 9],        // the last past the data
        vec![0, 2, u64::MAX, 6], // near overflow
    ]
    .into_iter()
    .enumerate()
    {
        let uri = dir.path().join(format!("s{k}"));
        let name = sparse_var_array(&ctx, &uri);
        replace_tile(&uri, &name, "a0.offs", 0, &offsets_tile(&bad), 32);
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        for (lo, hi) in [(1, 100), (2, 3), (1, 4), (4, 4)] {
            let ranges = vec![vec![DimRange::Int(lo, hi)]];
            let got = r.sparse_query(&ranges, &["s"], Layout::Global).and_then(|mut q| q.read_all());
            let Err(e) = got else {
                // A run that does not touch the damaged offsets may read, but only correct values.
                let res = got.unwrap();
                let s = res.attr("s").unwrap();
                let offs = s.offsets.as_ref().unwrap();
                let want: Vec<&[u8]> = (lo..=hi.min(4)).map(|x| &b"aabbccdd"[(x as usize - 1) * 2..][..2]).collect();
                let cells: Vec<&[u8]> = (0..offs.len())
                    .map(|i| &s.data[offs[i] as usize..offs.get(i + 1).map_or(s.data.len(), |&o| o as usize)])
                    .collect();
                assert_eq!(cells, want, "offsets {bad:?}, range [{lo}, {hi}] read garbage");
                continue;
            };
            let msg = e.to_string();
            assert!(matches!(e, Error::Corrupt { .. }), "{bad:?} [{lo}, {hi}]: {msg}");
            let stored = stored_file(&uri, &name, "a0.offs").0;
            let stored = stored.file_name().unwrap().to_string_lossy();
            assert!(msg.contains(&*stored) && msg.contains("tile 0"), "{bad:?} [{lo}, {hi}]: {msg}");
        }
    }
}

/// Replaces `path` by a FIFO (a named pipe no one writes to).
fn make_fifo(path: &Path) {
    std::fs::remove_file(path).unwrap();
    let ok = std::process::Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

/// Runs `f` on a thread and returns its result, or fails the test if it takes longer than 20 s
/// (after writing to `fifo` once so a blocked open returns and the thread ends).
fn within_timeout<T: Send + 'static>(fifo: &Path, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(20)) {
        Ok(v) => v,
        Err(_) => {
            // Unblock the reader stuck in open(2) so it does not outlive the test forever.
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new().write(true).custom_flags(0o4000).open(fifo);
            panic!("hung on {}", fifo.display());
        }
    }
}

/// A tile file, a fragment's metadata or the schema that is a FIFO (or another non-regular
/// file) is an error naming it, in both read modes, instead of an `open` that never returns.
#[test]
fn non_regular_files_are_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["pread", "mmap"] {
        for target in ["tile", "metadata", "schema"] {
            let uri = dir.path().join(format!("{mode}-{target}"));
            let ctx = local_ctx();
            let schema = schema_2d(10, 10, 5, 5);
            Array::create(&ctx, &uri, &schema).unwrap();
            let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
            let vals: Vec<i32> = (0..100).collect();
            let name = w
                .write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))])
                .unwrap();
            drop(w);
            drop_record_copies(&uri); // so that the metadata file is read
            let fifo = match target {
                "tile" => stored_file(&uri, &name, "a0.data").0,
                "metadata" => frag_dir(&uri, &name).join(METADATA_FILE),
                _ => std::fs::read_dir(uri.join(SCHEMA_DIR)).unwrap().next().unwrap().unwrap().path(),
            };
            make_fifo(&fifo);
            let mut config = Config::new();
            config.set("vfs.read_mode", mode).unwrap();
            let ctx = Context::new(config).unwrap();
            let (u, s) = (uri.clone(), schema.clone());
            let got = within_timeout(&fifo, move || {
                let r = Array::open(&ctx, &u, Mode::Read)?;
                r.read(&Subarray::full(&s), &["a"], Layout::RowMajor).map(|_| ())
            });
            let msg = got.unwrap_err().to_string();
            let fname = fifo.file_name().unwrap().to_string_lossy().into_owned();
            assert!(msg.contains(&fname) && msg.contains("not a regular file"), "{mode} {target}: {msg}");
        }
    }
}
