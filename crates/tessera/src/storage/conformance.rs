//! The storage conformance suite: one set of checks, each a function of `&dyn Storage` and a root
//! folder, run against every backend (local with pread, local with mmap, memory, power loss, and
//! local and memory behind a pass-through `FailingStorage`). Also owns the tests of `Bytes`, of
//! fault injection and of cross-process locking.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::uninit::as_uninit;

use proptest::prelude::*;

use super::{
    Bytes, FailingStorage, LocalStorage, LockKind, MemoryStorage, PowerLossStorage, ReadMode, Staged, Storage,
    StorageError,
};

fn write_file(s: &dyn Storage, path: &Path, parts: &[&[u8]]) {
    let mut h = s.create(path).unwrap();
    let mut pos = 0;
    for p in parts {
        assert_eq!(h.position(), pos);
        h.write_all(p).unwrap();
        pos += p.len() as u64;
    }
    assert_eq!(h.position(), pos);
    h.finish().unwrap();
}

#[track_caller]
fn assert_not_found<T>(r: Result<T, StorageError>) {
    match r {
        Err(StorageError::NotFound { .. }) => {}
        Err(e) => panic!("expected NotFound, got {e:?}"),
        Ok(_) => panic!("expected NotFound, got Ok"),
    }
}

#[track_caller]
fn assert_out_of_bounds<T>(r: Result<T, StorageError>) {
    match r {
        Err(StorageError::OutOfBounds { .. }) => {}
        Err(e) => panic!("expected OutOfBounds, got {e:?}"),
        Ok(_) => panic!("expected OutOfBounds, got Ok"),
    }
}

#[track_caller]
fn assert_would_block<T>(r: Result<T, StorageError>) {
    match r {
        Err(StorageError::WouldBlock { .. }) => {}
        Err(e) => panic!("expected WouldBlock, got {e:?}"),
        Ok(_) => panic!("expected WouldBlock, got Ok"),
    }
}

/// Whether `s` has real folders (and locks): every backend but object stores, whose folders are
/// marker objects and whose files appear only when finished.
fn has_folders(s: &dyn Storage, root: &Path) -> bool {
    s.lock_free_grace(root).is_none()
}

// ---------------------------------------------------------------------------------------------
// Checks run against every backend.
// ---------------------------------------------------------------------------------------------

fn write_and_read(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    assert!(s.is_dir(root));
    let p = root.join("data.bin");
    write_file(s, &p, &[b"hello ", b"", b"world"]);
    assert!(s.is_file(&p));
    assert!(!s.is_dir(&p));
    assert!(!s.is_file(root));
    assert_eq!(s.file_size(&p).unwrap(), 11);
    assert_eq!(&*s.read_all(&p).unwrap(), b"hello world");
    assert_eq!(&*s.read_range(&p, 6, 5).unwrap(), b"world");
    assert_eq!(&*s.read_range(&p, 0, 5).unwrap(), b"hello");
    assert_eq!(&*s.read_range(&p, 11, 0).unwrap(), b"");
    assert_eq!(s.read_range(&p, 3, 4).unwrap().into_vec(), b"lo w".to_vec());
    // Reading again (cached map in mmap mode) gives the same bytes.
    assert_eq!(&*s.read_range(&p, 2, 3).unwrap(), b"llo");
    s.sync_dir(root).unwrap();
}

fn large_writes(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("big");
    let big: Vec<u8> = (0..3 * (1u32 << 20) + 17).map(|i| (i % 251) as u8).collect();
    write_file(s, &p, &[b"ab", &big, b"cd", &big[..1000]]);
    let all = s.read_all(&p).unwrap();
    assert_eq!(all.len(), 2 + big.len() + 2 + 1000);
    assert_eq!(&all[..2], b"ab");
    assert_eq!(&all[2..2 + big.len()], &big[..]);
    assert_eq!(&all[2 + big.len()..4 + big.len()], b"cd");
    assert_eq!(&all[4 + big.len()..], &big[..1000]);
    let mid = s.read_range(&p, 1 << 20, 4096).unwrap();
    assert_eq!(&*mid, &big[(1 << 20) - 2..(1 << 20) - 2 + 4096]);
}

/// Files larger than an object store's part size (5 MiB in the tests) are uploaded in parts;
/// a handle dropped before `finish` leaves no object behind there.
fn multipart_files(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("parts");
    let chunk: Vec<u8> = (0..(1u32 << 20) + 3).map(|i| (i % 253) as u8).collect();
    let mut h = s.create(&p).unwrap();
    for _ in 0..12 {
        h.write_all(&chunk).unwrap();
    }
    h.finish().unwrap();
    assert_eq!(s.file_size(&p).unwrap(), 12 * chunk.len() as u64);
    let all = s.read_all(&p).unwrap();
    assert!(all.chunks(chunk.len()).all(|c| c == &chunk[..]));
    // A long range (fetched in pieces by object stores) equals the same bytes of the whole.
    let long = s.read_range(&p, 100, 11 * chunk.len() as u64).unwrap();
    assert_eq!(&*long, &all[100..100 + 11 * chunk.len()]);
    let off = 7 * chunk.len() as u64 - 5;
    assert_eq!(&*s.read_range(&p, off, 10).unwrap(), &[&chunk[chunk.len() - 5..], &chunk[..5]].concat()[..]);
    // One write of several parts at once, then a small one: cut into parts the same way.
    let one = root.join("one-write");
    let mut h = s.create(&one).unwrap();
    h.write_all(&all[..11 * chunk.len()]).unwrap();
    h.write_all(&all[11 * chunk.len()..]).unwrap();
    assert_eq!(h.position(), all.len() as u64);
    h.finish().unwrap();
    assert!(*s.read_all(&one).unwrap() == *all, "a file written in one call differs");
    s.remove_file(&one).unwrap();
    let q = root.join("abandoned");
    let mut h = s.create(&q).unwrap();
    for _ in 0..7 {
        h.write_all(&chunk).unwrap();
    }
    drop(h);
    if !has_folders(s, root) {
        assert!(!s.is_file(&q));
        assert_eq!(s.list_dir(root).unwrap(), vec!["parts"]);
    }
}

/// `read_all_within` reads a file no larger than its bound and only tells the size of a larger one.
fn read_all_within_bounds(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("ten");
    write_file(s, &p, &[b"0123456789"]);
    assert_eq!(&*s.read_all_within(&p, 10).unwrap().unwrap(), b"0123456789");
    assert_eq!(&*s.read_all_within(&p, u64::MAX).unwrap().unwrap(), b"0123456789");
    assert_eq!(s.read_all_within(&p, 9).unwrap().unwrap_err(), 10);
    assert_eq!(s.read_all_within(&p, 0).unwrap().unwrap_err(), 10);
    let e = root.join("empty");
    write_file(s, &e, &[]);
    assert!(s.read_all_within(&e, 0).unwrap().unwrap().is_empty());
    assert_not_found(s.read_all_within(&root.join("nope"), 10));
}

fn empty_file(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("empty");
    write_file(s, &p, &[]);
    assert_eq!(s.file_size(&p).unwrap(), 0);
    assert!(s.read_all(&p).unwrap().is_empty());
    assert!(s.read_range(&p, 0, 0).unwrap().is_empty());
    assert_out_of_bounds(s.read_range(&p, 0, 1));
    assert_out_of_bounds(s.read_range(&p, 1, 0));
    s.write_atomic(&root.join("empty2"), b"").unwrap();
    assert!(s.read_all(&root.join("empty2")).unwrap().is_empty());
}

fn create_existing_fails(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("f");
    write_file(s, &p, &[b"one"]);
    if !has_folders(s, root) {
        // Object stores: nothing is sent before `finish`, which refuses to replace the object.
        let mut h = s.create(&p).unwrap();
        h.write_all(b"two").unwrap();
        match h.finish() {
            Err(StorageError::Io { source, .. }) => assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists),
            other => panic!("expected AlreadyExists, got {other:?}"),
        }
        assert_eq!(&*s.read_all(&p).unwrap(), b"one");
        assert!(s.read_all(root).is_err());
        assert!(s.file_size(root).is_err());
        return;
    }
    match s.create(&p) {
        Err(StorageError::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists);
        }
        Err(e) => panic!("expected AlreadyExists, got {e:?}"),
        Ok(_) => panic!("expected AlreadyExists, got Ok"),
    }
    assert_eq!(&*s.read_all(&p).unwrap(), b"one");
    // A folder is not a file.
    assert!(s.create(root).is_err());
    assert!(s.read_all(root).is_err());
    assert!(s.file_size(root).is_err());
}

fn out_of_bounds(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("f");
    write_file(s, &p, &[b"0123456789"]);
    assert_out_of_bounds(s.read_range(&p, 5, 6));
    assert_out_of_bounds(s.read_range(&p, 11, 0));
    assert_out_of_bounds(s.read_range(&p, 100, 1));
    assert_out_of_bounds(s.read_range(&p, u64::MAX, 2));
    assert_out_of_bounds(s.read_range(&p, 1, u64::MAX));
    assert_out_of_bounds(s.read_range(&p, 0, 1 << 40));
    match s.read_range(&p, 8, 3) {
        Err(StorageError::OutOfBounds { offset: 8, len: 3, size: 10, path }) => {
            assert_eq!(path, p);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(&*s.read_range(&p, 5, 5).unwrap(), b"56789");
}

fn missing_paths(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("nope");
    assert!(!s.is_file(&p));
    assert!(!s.is_dir(&p));
    assert_not_found(s.read_range(&p, 0, 0));
    assert_not_found(s.read_all(&p));
    assert_not_found(s.file_size(&p));
    assert_not_found(s.list_dir(&p));
    assert_not_found(s.remove_file(&p));
    assert_not_found(s.remove_dir_all(&p));
    let e = s.read_all(&p).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
    if !has_folders(s, root) {
        // Object stores have no folders to be missing, no syncs and no locks.
        return;
    }
    assert_not_found(s.sync_dir(&p));
    assert_not_found(s.create(&p.join("child")));
    assert_not_found(s.write_atomic(&p.join("child"), b"x"));
    assert_not_found(s.lock(&p.join("LOCK"), LockKind::Exclusive, false));
}

fn write_atomic_replaces(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("meta.json");
    s.write_atomic(&p, b"first version").unwrap();
    assert_eq!(&*s.read_all(&p).unwrap(), b"first version");
    let held = s.read_range(&p, 0, 5).unwrap();
    // Same length, then shorter, then longer: every read sees the latest whole content.
    s.write_atomic(&p, b"other version").unwrap();
    assert_eq!(&*s.read_all(&p).unwrap(), b"other version");
    assert_eq!(&*s.read_range(&p, 0, 5).unwrap(), b"other");
    s.write_atomic(&p, b"v3").unwrap();
    assert_eq!(&*s.read_all(&p).unwrap(), b"v3");
    assert_eq!(s.file_size(&p).unwrap(), 2);
    s.write_atomic(&p, b"version four").unwrap();
    assert_eq!(&*s.read_all(&p).unwrap(), b"version four");
    // Bytes read earlier are unaffected.
    assert_eq!(&*held, b"first");
    // No temporary files left behind, and none visible.
    assert_eq!(s.list_dir(root).unwrap(), vec!["meta.json".to_string()]);
    for i in 0..20 {
        s.write_atomic(&root.join(format!("m{i}")), &[i as u8; 7]).unwrap();
    }
    assert_eq!(s.list_dir(root).unwrap().len(), 21);
}

fn write_new_creates_once(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("00000000000000000001");
    assert!(s.write_new(&p, b"first").unwrap());
    assert!(!s.write_new(&p, b"second").unwrap());
    assert_eq!(&*s.read_all(&p).unwrap(), b"first");
    if has_folders(s, root) {
        assert_not_found(s.write_new(&root.join("missing").join("x"), b"x"));
    }
    // Of many threads racing for one name, exactly one wins; the file holds its bytes whole.
    let winners: Vec<u8> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8u8)
            .map(|i| {
                let q = root.join("race");
                scope.spawn(move || s.write_new(&q, &[i; 4096]).unwrap().then_some(i))
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(winners.len(), 1);
    assert_eq!(&*s.read_all(&root.join("race")).unwrap(), &[winners[0]; 4096][..]);
    // No temporary file remains, visible or not.
    assert_eq!(s.list_dir(root).unwrap(), vec!["00000000000000000001".to_string(), "race".to_string()]);
    assert!(s.list_temps(root).unwrap().is_empty());
}

fn staged_files_publish_once(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    assert!(s.write_new(&root.join("1"), b"taken").unwrap());
    let staged = Staged::new(s, root, b"staged".to_vec()).unwrap();
    // Staged content is not visible before it is published.
    assert_eq!(s.list_dir(root).unwrap(), vec!["1".to_string()]);
    // A taken name is refused and left alone; the next one is free.
    assert!(!staged.publish_new(&root.join("1")).unwrap());
    assert_eq!(&*s.read_all(&root.join("1")).unwrap(), b"taken");
    assert!(staged.publish_new(&root.join("2")).unwrap());
    assert_eq!(&*s.read_all(&root.join("2")).unwrap(), b"staged");
    drop(staged);
    // Dropping it leaves the published file and no temporary file.
    assert_eq!(&*s.read_all(&root.join("2")).unwrap(), b"staged");
    assert_eq!(s.list_dir(root).unwrap(), vec!["1".to_string(), "2".to_string()]);
    assert!(s.list_temps(root).unwrap().is_empty());
    // Of many staged files racing for one name, exactly one wins.
    let winners: Vec<u8> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8u8)
            .map(|i| {
                scope.spawn(move || {
                    let staged = Staged::new(s, root, vec![i; 4096]).unwrap();
                    staged.publish_new(&root.join("race")).unwrap().then_some(i)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(winners.len(), 1);
    assert_eq!(&*s.read_all(&root.join("race")).unwrap(), &[winners[0]; 4096][..]);
    assert!(s.list_temps(root).unwrap().is_empty());
    // One never published leaves nothing.
    drop(Staged::new(s, root, b"dropped".to_vec()).unwrap());
    assert_eq!(s.list_dir(root).unwrap().len(), 3);
    assert!(s.list_temps(root).unwrap().is_empty());
    if has_folders(s, root) {
        // Refused when staged, or when published where the backend only holds the bytes.
        let missing = root.join("missing");
        assert!(Staged::new(s, &missing, b"x".to_vec()).and_then(|st| st.publish_new(&missing.join("x"))).is_err());
    }
}

fn list_dir_sorted(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    assert!(s.list_dir(root).unwrap().is_empty());
    for name in ["zeta", "alpha", "Mid", "beta", "a"] {
        write_file(s, &root.join(name), &[name.as_bytes()]);
    }
    s.create_dir_all(&root.join("sub").join("deeper")).unwrap();
    write_file(s, &root.join("sub").join("inner"), &[b"x"]);
    assert_eq!(s.list_dir(root).unwrap(), vec!["Mid", "a", "alpha", "beta", "sub", "zeta"]);
    assert_eq!(s.list_dir(&root.join("sub")).unwrap(), vec!["deeper", "inner"]);
    assert!(s.list_dir(&root.join("sub").join("deeper")).unwrap().is_empty());
    // Usage counts files (folders and their markers are not files).
    assert_eq!(s.usage(&root.join("sub")).unwrap(), (1, 1));
    assert_eq!(s.usage(&root.join("zeta")).unwrap(), (4, 1));
    assert_eq!(s.usage(root).unwrap(), (4 + 5 + 3 + 4 + 1 + 1, 6));
    assert!(s.list_dir(&root.join("zeta")).is_err());
    // create_dir_all is idempotent and refuses to go through a file.
    s.create_dir_all(&root.join("sub")).unwrap();
    assert_eq!(s.list_dir(&root.join("sub")).unwrap(), vec!["deeper", "inner"]);
    if has_folders(s, root) {
        assert!(s.create_dir_all(&root.join("zeta").join("x")).is_err());
    }
}

fn remove(s: &dyn Storage, root: &Path) {
    s.create_dir_all(&root.join("d").join("e")).unwrap();
    write_file(s, &root.join("f"), &[b"file"]);
    write_file(s, &root.join("d").join("g"), &[b"in d"]);
    write_file(s, &root.join("d").join("e").join("h"), &[b"in e"]);
    write_file(s, &root.join("dd"), &[b"sibling with common prefix"]);
    assert_eq!(&*s.read_all(&root.join("d").join("g")).unwrap(), b"in d");
    assert!(s.remove_file(&root.join("d")).is_err());
    assert!(s.remove_dir_all(&root.join("f")).is_err());
    s.remove_file(&root.join("f")).unwrap();
    assert!(!s.is_file(&root.join("f")));
    assert_not_found(s.read_all(&root.join("f")));
    s.remove_dir_all(&root.join("d")).unwrap();
    assert!(!s.is_dir(&root.join("d")));
    assert_not_found(s.read_all(&root.join("d").join("g")));
    assert_eq!(s.list_dir(root).unwrap(), vec!["dd"]);
    assert_eq!(&*s.read_all(&root.join("dd")).unwrap(), b"sibling with common prefix");
    // A path can be used again after removal, with new content.
    s.create_dir_all(&root.join("d")).unwrap();
    write_file(s, &root.join("d").join("g"), &[b"new content"]);
    assert_eq!(&*s.read_all(&root.join("d").join("g")).unwrap(), b"new content");
    write_file(s, &root.join("f"), &[b"refile"]);
    assert_eq!(&*s.read_range(&root.join("f"), 2, 4).unwrap(), b"file");
}

/// Immutable reads give what range reads give, with the same errors; a removed file is gone
/// for them too, and a path used again after removal is read anew.
fn immutable_reads(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("tile.data");
    write_file(s, &p, &[b"0123456789"]);
    for _ in 0..2 {
        assert_eq!(&*s.read_immutable(&p, 2, 5).unwrap(), b"23456");
        let mut buf = [0u8; 4];
        s.read_immutable_into(&p, 6, as_uninit(&mut buf)).unwrap();
        assert_eq!(&buf, b"6789");
        assert_eq!(&*s.read_immutable(&p, 10, 0).unwrap(), b"");
        assert_out_of_bounds(s.read_immutable(&p, 8, 3));
        assert_out_of_bounds(s.read_immutable_into(&p, 9, as_uninit(&mut buf)));
        assert_out_of_bounds(s.read_immutable(&p, u64::MAX, 2));
        // What the backend holds in memory fills a prefix, exactly; a backend that cannot tell
        // says so (and may not check the range).
        let mut buf = [b'.'; 5];
        match s.read_immutable_cached(&p, 3, as_uninit(&mut buf)).unwrap() {
            Some(n) => {
                assert!(n <= 5);
                assert_eq!(&buf[..n], &b"34567"[..n]);
                assert!(buf[n..].iter().all(|&b| b == b'.'));
            }
            None => assert_eq!(&buf, b"....."),
        }
        assert!(matches!(
            s.read_immutable_cached(&p, 8, as_uninit(&mut buf)),
            Err(StorageError::OutOfBounds { .. }) | Ok(None)
        ));
        // A stream of its own reads the same bytes, in any order, with the same errors, and
        // two streams of one file do not disturb each other.
        if let (Some(mut a), Some(mut b)) = (s.immutable_stream(&p).unwrap(), s.immutable_stream(&p).unwrap()) {
            let mut buf = [0u8; 3];
            a.read_into(7, as_uninit(&mut buf)).unwrap();
            assert_eq!(&buf, b"789");
            b.read_into(0, as_uninit(&mut buf)).unwrap();
            assert_eq!(&buf, b"012");
            a.read_into(2, as_uninit(&mut buf)).unwrap();
            assert_eq!(&buf, b"234");
            a.read_into(10, as_uninit(&mut [])).unwrap();
            assert_out_of_bounds(a.read_into(8, as_uninit(&mut buf)));
            assert_out_of_bounds(b.read_into(u64::MAX, as_uninit(&mut buf)));
        }
    }
    assert!(matches!(s.immutable_stream(&root.join("nope")), Ok(None) | Err(StorageError::NotFound { .. })));
    assert_not_found(s.read_immutable(&root.join("nope"), 0, 1));
    s.remove_file(&p).unwrap();
    assert_not_found(s.read_immutable(&p, 0, 1));
    write_file(s, &p, &[b"abcdefghijklmnop"]);
    assert_eq!(&*s.read_immutable(&p, 10, 6).unwrap(), b"klmnop");
    s.remove_dir_all(root).unwrap();
    assert_not_found(s.read_immutable(&p, 0, 1));
}

fn read_while_writing(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("growing");
    let mut h = s.create(&p).unwrap();
    // (Object stores show the object only when finished.)
    assert_eq!(s.is_file(&p), has_folders(s, root));
    h.write_all(b"abc").unwrap();
    // Content before `finish` is unspecified, but reading must not break later reads.
    let _ = s.read_all(&p);
    h.write_all(b"defgh").unwrap();
    h.finish().unwrap();
    assert_eq!(&*s.read_all(&p).unwrap(), b"abcdefgh");
    assert_eq!(&*s.read_range(&p, 4, 4).unwrap(), b"efgh");
}

fn concurrent_reads(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("shared");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 256) as u8).collect();
    write_file(s, &p, &[&data]);
    std::thread::scope(|sc| {
        for t in 0..4u64 {
            let (p, data) = (&p, &data);
            sc.spawn(move || {
                for i in 0..50u64 {
                    let off = (t * 1000 + i * 997) % 90_000;
                    let got = s.read_range(p, off, 1000).unwrap();
                    assert_eq!(&*got, &data[off as usize..off as usize + 1000]);
                }
            });
        }
    });
}

fn lock_exclusive_excludes(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("LOCK");
    let g = s.lock(&p, LockKind::Exclusive, false).unwrap();
    assert!(s.is_file(&p));
    assert_would_block(s.lock(&p, LockKind::Exclusive, false));
    assert_would_block(s.lock(&p, LockKind::Shared, false));
    // Another lock file is independent.
    let other = s.lock(&root.join("LOCK2"), LockKind::Exclusive, false).unwrap();
    drop(g);
    let g = s.lock(&p, LockKind::Shared, false).unwrap();
    drop(g);
    let g = s.lock(&p, LockKind::Exclusive, false).unwrap();
    drop(g);
    drop(other);
}

fn lock_shared_coexist(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("LOCK");
    let a = s.lock(&p, LockKind::Shared, false).unwrap();
    let b = s.lock(&p, LockKind::Shared, true).unwrap();
    assert_would_block(s.lock(&p, LockKind::Exclusive, false));
    drop(a);
    assert_would_block(s.lock(&p, LockKind::Exclusive, false));
    drop(b);
    let c = s.lock(&p, LockKind::Exclusive, false).unwrap();
    drop(c);
    // The lock file survives and existing content is kept.
    s.write_atomic(&root.join("LOCK3"), b"keep").unwrap();
    drop(s.lock(&root.join("LOCK3"), LockKind::Exclusive, true).unwrap());
    assert_eq!(&*s.read_all(&root.join("LOCK3")).unwrap(), b"keep");
}

fn lock_wait_granted_after_release(s: &dyn Storage, root: &Path) {
    s.create_dir_all(root).unwrap();
    let p = root.join("LOCK");
    for (held, wanted) in [
        (LockKind::Exclusive, LockKind::Exclusive),
        (LockKind::Exclusive, LockKind::Shared),
        (LockKind::Shared, LockKind::Exclusive),
    ] {
        let released = AtomicBool::new(false);
        let guard = s.lock(&p, held, true).unwrap();
        std::thread::scope(|sc| {
            let waiter = sc.spawn(|| {
                let g = s.lock(&p, wanted, true).unwrap();
                assert!(released.load(Ordering::SeqCst), "{wanted:?} granted while {held:?} held");
                drop(g);
            });
            std::thread::sleep(Duration::from_millis(100));
            released.store(true, Ordering::SeqCst);
            drop(guard);
            waiter.join().unwrap();
        });
        drop(s.lock(&p, LockKind::Exclusive, false).unwrap());
    }
}

macro_rules! conformance {
    ($($check:ident),* $(,)?) => {
        mod local_pread {
            $( #[test] fn $check() {
                let dir = tempfile::tempdir().unwrap();
                let s = super::LocalStorage::new(super::ReadMode::Pread);
                super::$check(&s, &dir.path().join("root"));
            } )*
        }
        mod local_mmap {
            $( #[test] fn $check() {
                let dir = tempfile::tempdir().unwrap();
                let s = super::LocalStorage::new(super::ReadMode::Mmap);
                super::$check(&s, &dir.path().join("root"));
            } )*
        }
        mod memory {
            $( #[test] fn $check() {
                super::$check(&super::MemoryStorage::new(), std::path::Path::new("/mem/root"));
            } )*
        }
        mod memory_relative {
            $( #[test] fn $check() {
                super::$check(&super::MemoryStorage::new(), std::path::Path::new("root"));
            } )*
        }
        mod failing_local_mmap {
            $( #[test] fn $check() {
                let dir = tempfile::tempdir().unwrap();
                let s = super::FailingStorage::new(std::sync::Arc::new(
                    super::LocalStorage::new(super::ReadMode::Mmap),
                ));
                super::$check(&s, &dir.path().join("root"));
                assert!(s.mutations() > 0);
            } )*
        }
        mod power_loss {
            $( #[test] fn $check() {
                super::$check(&super::PowerLossStorage::new(), std::path::Path::new("/mem/root"));
            } )*
        }
        mod power_loss_relative {
            $( #[test] fn $check() {
                super::$check(&super::PowerLossStorage::new(), std::path::Path::new("root"));
            } )*
        }
        mod failing_memory {
            $( #[test] fn $check() {
                let s = super::FailingStorage::new(std::sync::Arc::new(super::MemoryStorage::new()));
                super::$check(&s, std::path::Path::new("/mem/root"));
                assert!(s.mutations() > 0);
            } )*
        }
    };
}

/// The checks run against an S3 server on loopback (`tessera-s3-server`, in process).
macro_rules! conformance_s3 {
    ($($check:ident),* $(,)?) => {
        mod s3 {
            $( #[test] fn $check() {
                let s3 = crate::storage::s3_testing::S3Test::start();
                super::$check(s3.storage(), &s3.path("root"));
            } )*
        }
    };
}

/// Every check but the lock checks runs on every backend, the S3 server included; the lock
/// checks on the backends with locks.
macro_rules! all_conformance {
    ([$($check:ident),* $(,)?], [$($lock:ident),* $(,)?]) => {
        conformance_s3!($($check),*);
        conformance!($($check,)* $($lock),*);
    };
}

all_conformance!(
    [
        write_and_read,
        large_writes,
        multipart_files,
        read_all_within_bounds,
        empty_file,
        create_existing_fails,
        out_of_bounds,
        missing_paths,
        write_atomic_replaces,
        write_new_creates_once,
        staged_files_publish_once,
        list_dir_sorted,
        remove,
        read_while_writing,
        immutable_reads,
        concurrent_reads,
    ],
    [lock_exclusive_excludes, lock_shared_coexist, lock_wait_granted_after_release]
);

// ---------------------------------------------------------------------------------------------
// Backend-specific tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn mmap_reads_are_zero_copy_slices() {
    let dir = tempfile::tempdir().unwrap();
    let s = LocalStorage::new(ReadMode::Mmap);
    let p = dir.path().join("f");
    write_file(&s, &p, &[&[7u8; 4096]]);
    let a = s.read_range(&p, 10, 100).unwrap();
    let b = s.read_range(&p, 30, 100).unwrap();
    assert_eq!(b.as_ptr() as usize - a.as_ptr() as usize, 20);
    let all = s.read_all(&p).unwrap();
    assert_eq!(a.as_ptr() as usize - all.as_ptr() as usize, 10);
    // Removing the file drops the cached map but not the bytes already handed out.
    s.remove_file(&p).unwrap();
    assert_eq!(&*a, &[7u8; 100][..]);
    assert_not_found(s.read_all(&p));
}

/// Local pread storage gives a stream its own descriptor (not one of the kept open files, and
/// still readable after the file is removed, as an open file is); mapped storage gives none
/// (its reads copy from the map).
#[test]
fn local_pread_streams_have_descriptors_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    let pread = LocalStorage::new(ReadMode::Pread);
    write_file(&pread, &p, &[b"0123456789"]);
    assert!(LocalStorage::new(ReadMode::Mmap).immutable_stream(&p).unwrap().is_none());
    let mut own = pread.immutable_stream(&p).unwrap().expect("a stream");
    assert_eq!(pread.open_files(), 0);
    pread.remove_file(&p).unwrap();
    let mut buf = [0u8; 4];
    own.read_into(3, as_uninit(&mut buf)).unwrap();
    assert_eq!(&buf, b"3456");
}

#[test]
fn pread_keeps_at_most_open_files_files_open() {
    let dir = tempfile::tempdir().unwrap();
    let s = LocalStorage::new(ReadMode::Pread);
    let n = super::local::OPEN_FILES + 40;
    for i in 0..n {
        write_file(&s, &dir.path().join(format!("f{i}")), &[&(i as u32).to_le_bytes()]);
    }
    for round in 0..2 {
        for i in 0..n {
            let b = s.read_immutable(&dir.path().join(format!("f{i}")), 0, 4).unwrap();
            assert_eq!(&*b, &(i as u32).to_le_bytes(), "round {round}, file {i}");
        }
        assert!(s.open_files() <= super::local::OPEN_FILES);
    }
}

#[test]
fn mmap_sees_replacement_by_another_writer() {
    // A second `LocalStorage` (standing in for another process) replaces a file the first one
    // has mapped; the first must notice.
    let dir = tempfile::tempdir().unwrap();
    let reader = LocalStorage::new(ReadMode::Mmap);
    let writer = LocalStorage::new(ReadMode::Pread);
    let p = dir.path().join("meta");
    writer.write_atomic(&p, b"old contents").unwrap();
    assert_eq!(&*reader.read_all(&p).unwrap(), b"old contents");
    writer.write_atomic(&p, b"new contents").unwrap();
    assert_eq!(&*reader.read_all(&p).unwrap(), b"new contents");
    writer.remove_file(&p).unwrap();
    assert_not_found(reader.read_all(&p));
}

#[test]
fn write_atomic_cleans_up_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let s = LocalStorage::new(ReadMode::Pread);
    let target = dir.path().join("adir");
    s.create_dir_all(&target).unwrap();
    // Renaming a file over a non-empty folder fails; the temporary file must not remain.
    write_file(&s, &target.join("x"), &[b"x"]);
    assert!(s.write_atomic(&target, b"data").is_err());
    let names: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec!["adir".to_string()]);
}

#[test]
fn list_dir_hides_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".meta.tmp-123-4"), b"partial").unwrap();
    std::fs::write(dir.path().join("meta"), b"whole").unwrap();
    std::fs::write(dir.path().join(".meta.tmp-1700000000000-123-5"), b"partial").unwrap();
    let s = LocalStorage::new(ReadMode::Pread);
    assert_eq!(s.list_dir(dir.path()).unwrap(), vec!["meta".to_string()]);
    // Both are listed as temporary files: the new name carries its creation time, the old one
    // (before format 3) gets the file's modification time.
    let temps = s.list_temps(dir.path()).unwrap();
    assert_eq!(temps.len(), 2);
    assert_eq!(temps[1], (".meta.tmp-1700000000000-123-5".to_string(), Some(1_700_000_000_000)));
    assert_eq!(temps[0].0, ".meta.tmp-123-4");
    assert!(temps[0].1.is_some_and(|ms| ms > 1_700_000_000_000));
}

#[test]
fn errors_name_path_and_operation() {
    let dir = tempfile::tempdir().unwrap();
    let s = LocalStorage::new(ReadMode::Pread);
    let p = dir.path().join("f");
    write_file(&s, &p, &[b"x"]);
    let e = s.create(&p).err().unwrap();
    let text = e.to_string();
    assert!(text.starts_with("create "), "{text}");
    assert!(text.contains(&*p.to_string_lossy()), "{text}");
    let e = s.read_range(&p, 0, 2).unwrap_err();
    assert!(e.to_string().contains(&*p.to_string_lossy()), "{e}");
}

/// Runs `flock(1)` on `path` with `args`; `None` if the tool is unavailable.
fn flock_cli(args: &[&str], path: &Path) -> Option<bool> {
    let out = std::process::Command::new("flock").args(args).arg(path).arg("true").output().ok()?;
    Some(out.status.success())
}

#[test]
fn local_lock_excludes_other_processes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("LOCK");
    let s = LocalStorage::new(ReadMode::Pread);
    let g = s.lock(&p, LockKind::Exclusive, true).unwrap();
    let Some(ok) = flock_cli(&["-n", "-s"], &p) else {
        eprintln!("flock(1) unavailable; skipping");
        return;
    };
    assert!(!ok, "another process got a shared lock while we hold it exclusively");
    drop(g);
    let g = s.lock(&p, LockKind::Shared, true).unwrap();
    assert_eq!(flock_cli(&["-n", "-s"], &p), Some(true));
    assert_eq!(flock_cli(&["-n", "-x"], &p), Some(false));
    drop(g);
    assert_eq!(flock_cli(&["-n", "-x"], &p), Some(true));

    // The other way round: a child process holds the lock until its stdin closes.
    let mut child = std::process::Command::new("flock")
        .arg("-x")
        .arg(&p)
        .arg("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match s.lock(&p, LockKind::Shared, false) {
            Err(StorageError::WouldBlock { .. }) => break,
            Ok(g) => drop(g),
            Err(e) => panic!("{e}"),
        }
        assert!(std::time::Instant::now() < deadline, "child never took the lock");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(child.stdin.take());
    let g = s.lock(&p, LockKind::Exclusive, true).unwrap();
    assert!(child.wait().unwrap().success());
    drop(g);
}

// ---------------------------------------------------------------------------------------------
// FailingStorage.
// ---------------------------------------------------------------------------------------------

#[track_caller]
fn assert_injected<T>(r: Result<T, StorageError>, want_op: &str) {
    match r {
        Err(StorageError::Injected { op, .. }) => assert_eq!(op, want_op),
        Err(e) => panic!("expected Injected at {want_op}, got {e:?}"),
        Ok(_) => panic!("expected Injected at {want_op}, got Ok"),
    }
}

fn failing_injects_after_n(inner: Arc<dyn Storage>, root: &Path) {
    let s = FailingStorage::new(Arc::clone(&inner));
    assert_eq!(s.mutations(), 0);
    s.create_dir_all(root).unwrap(); // 1
    s.write_atomic(&root.join("a"), b"aaa").unwrap(); // 2
    let mut h = s.create(&root.join("b")).unwrap(); // 3
    h.write_all(b"bb").unwrap(); // 4
    h.write_all(b"b").unwrap(); // 5
    h.finish().unwrap(); // 6
    assert_eq!(s.mutations(), 6);
    // Reads, queries and locks are not counted.
    assert_eq!(&*s.read_all(&root.join("b")).unwrap(), b"bbb");
    assert_eq!(s.list_dir(root).unwrap(), vec!["a", "b"]);
    drop(s.lock(&root.join("LOCK"), LockKind::Exclusive, false).unwrap());
    assert_eq!(s.mutations(), 6);

    s.fail_after(Some(2));
    s.sync_dir(root).unwrap(); // 7
    s.remove_file(&root.join("a")).unwrap(); // 8
    assert_injected(s.create(&root.join("c")), "create");
    assert!(!inner.is_file(&root.join("c")), "an injected fault must not reach the backend");
    assert_injected(s.write_atomic(&root.join("c"), b"c"), "write_atomic");
    assert_injected(s.create_dir_all(&root.join("d")), "create_dir_all");
    assert_injected(s.sync_dir(root), "sync_dir");
    assert_injected(s.remove_file(&root.join("b")), "remove_file");
    assert_injected(s.remove_dir_all(root), "remove_dir_all");
    assert_eq!(s.mutations(), 8);
    // Reads keep working.
    assert_eq!(&*s.read_range(&root.join("b"), 1, 2).unwrap(), b"bb");
    assert!(s.is_file(&root.join("b")));
    assert!(!s.is_file(&root.join("a")));

    // A fault in the middle of a file: the handle's writes and finish fail.
    s.fail_after(Some(2));
    let mut h = s.create(&root.join("e")).unwrap();
    h.write_all(b"e1").unwrap();
    assert_injected(h.write_all(b"e2"), "write");
    assert_eq!(h.position(), 2);
    assert_injected(h.finish(), "finish");
    assert_eq!(s.mutations(), 10);

    s.fail_after(Some(0));
    assert_injected(s.sync_dir(root), "sync_dir");
    s.fail_after(None);
    s.write_atomic(&root.join("c"), b"c").unwrap();
    assert_eq!(&*inner.read_all(&root.join("c")).unwrap(), b"c");
    assert_eq!(s.mutations(), 11);
    assert!(Arc::ptr_eq(s.inner(), &inner));
}

#[test]
fn failing_injects_after_n_memory() {
    failing_injects_after_n(Arc::new(MemoryStorage::new()), Path::new("/r"));
}

#[test]
fn failing_injects_after_n_local() {
    let dir = tempfile::tempdir().unwrap();
    failing_injects_after_n(Arc::new(LocalStorage::new(ReadMode::Mmap)), &dir.path().join("r"));
}

#[test]
fn failing_budget_is_exact_across_threads() {
    let s = FailingStorage::new(Arc::new(MemoryStorage::new()));
    s.fail_after(Some(37));
    let ok = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|sc| {
        for t in 0..4 {
            let (s, ok) = (&s, &ok);
            sc.spawn(move || {
                for i in 0..20 {
                    if s.create_dir_all(&Path::new("/x").join(format!("{t}-{i}"))).is_ok() {
                        ok.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    assert_eq!(ok.load(Ordering::SeqCst), 37);
    assert_eq!(s.mutations(), 37);
    assert_eq!(s.list_dir(Path::new("/x")).unwrap().len(), 37);
}

// ---------------------------------------------------------------------------------------------
// Bytes.
// ---------------------------------------------------------------------------------------------

#[test]
fn bytes_slicing() {
    let b = Bytes::from_vec((0u8..100).collect());
    assert_eq!(b.len(), 100);
    let s = b.slice(10, 50);
    assert_eq!(s[0], 10);
    assert_eq!(s.len(), 50);
    let t = s.slice(5, 10);
    assert_eq!(&*t, &(15u8..25).collect::<Vec<_>>()[..]);
    assert!(s.slice(50, 0).is_empty());
    assert_eq!(t.clone().into_vec(), (15u8..25).collect::<Vec<_>>());
    assert_eq!(format!("{t:?}"), "Bytes(10 bytes)");
    assert_eq!(Bytes::default().len(), 0);
    assert_eq!(Bytes::from(vec![1, 2]), Bytes::from_vec(vec![1, 2]));
    assert_eq!(Bytes::from(vec![1, 2]).as_ref(), &[1, 2]);
}

#[test]
#[should_panic(expected = "out of range")]
fn bytes_slice_out_of_range_panics() {
    let b = Bytes::from_vec(vec![0; 10]);
    let _ = b.slice(8, 3);
}

#[test]
#[should_panic(expected = "out of range")]
fn bytes_slice_overflow_panics() {
    let b = Bytes::from_vec(vec![0; 10]).slice(1, 5);
    let _ = b.slice(usize::MAX, 2);
}

#[test]
fn bytes_into_vec_avoids_copy_when_unique() {
    let v = vec![1u8, 2, 3, 4];
    let ptr = v.as_ptr();
    let b = Bytes::from_vec(v);
    let v = b.into_vec();
    assert_eq!(v.as_ptr(), ptr);
    // Shared: copies, and the other holder is unaffected.
    let b = Bytes::from_vec(vec![5u8, 6]);
    let c = b.clone();
    let mut v = b.into_vec();
    v[0] = 9;
    assert_eq!(&*c, &[5, 6]);
    // Once the other holder is gone, the whole buffer is moved out again.
    let ptr = c.as_ptr();
    let v = c.into_vec();
    assert_eq!(v.as_ptr(), ptr);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn bytes_slices_match_vec_slices(
        data in proptest::collection::vec(any::<u8>(), 0..200),
        a in 0usize..200, b in 0usize..200, c in 0usize..200, d in 0usize..200,
    ) {
        let (start, len) = (a.min(data.len()), b.min(data.len() - a.min(data.len())));
        let bytes = Bytes::from_vec(data.clone()).slice(start, len);
        let expect = &data[start..start + len];
        prop_assert_eq!(&*bytes, expect);
        let (s2, l2) = (c.min(len), d.min(len - c.min(len)));
        prop_assert_eq!(&*bytes.slice(s2, l2), &expect[s2..s2 + l2]);
        prop_assert_eq!(bytes.slice(s2, l2).into_vec(), expect[s2..s2 + l2].to_vec());
    }

    #[test]
    fn backends_agree_on_reads(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..6),
        ranges in proptest::collection::vec((0u64..1200, 0u64..400), 1..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let whole: Vec<u8> = chunks.concat();
        let backends: [(Box<dyn Storage>, std::path::PathBuf); 3] = [
            (Box::new(LocalStorage::new(ReadMode::Pread)), dir.path().join("p")),
            (Box::new(LocalStorage::new(ReadMode::Mmap)), dir.path().join("m")),
            (Box::new(MemoryStorage::new()), "/mem/f".into()),
        ];
        for (s, path) in &backends {
            s.create_dir_all(path.parent().unwrap()).unwrap();
            let parts: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            write_file(s.as_ref(), path, &parts);
            prop_assert_eq!(&*s.read_all(path).unwrap(), &whole[..]);
            for &(off, len) in &ranges {
                match s.read_range(path, off, len) {
                    Ok(b) => prop_assert_eq!(&*b, &whole[off as usize..(off + len) as usize]),
                    Err(StorageError::OutOfBounds { size, .. }) => {
                        prop_assert_eq!(size, whole.len() as u64);
                        prop_assert!(off + len > whole.len() as u64);
                    }
                    Err(e) => prop_assert!(false, "{}", e),
                }
            }
        }
    }
}

/// The pieces of a read from disk cover exactly the range asked for, back to back, from
/// `COLD_READ_FIRST` bytes doubling up to `COLD_READ_LARGEST`, and none for an empty range.
#[test]
fn cold_read_pieces_cover_the_range_in_growing_pieces() {
    use super::{cold_read_pieces, COLD_READ_FIRST, COLD_READ_LARGEST};
    assert_eq!(cold_read_pieces(7, 7).count(), 0);
    assert_eq!(cold_read_pieces(5, 9).collect::<Vec<_>>(), vec![5..9]);
    for (from, to) in [(0, 10_000_000), (4096, 4096 + COLD_READ_FIRST * 3), (1, COLD_READ_LARGEST * 5 + 3)] {
        let pieces: Vec<_> = cold_read_pieces(from, to).collect();
        assert_eq!(pieces.first().map(|p| p.start), Some(from));
        assert_eq!(pieces.last().map(|p| p.end), Some(to));
        let mut want = COLD_READ_FIRST;
        for (i, p) in pieces.iter().enumerate() {
            if i + 1 < pieces.len() {
                assert_eq!(p.end, pieces[i + 1].start);
                assert_eq!(p.len(), want);
            } else {
                assert!(!p.is_empty() && p.len() <= want);
            }
            want = (want * 2).min(COLD_READ_LARGEST);
        }
    }
}

/// The reads of a stream's first piece are a page each and cover it back to back; any other
/// piece is one read.
#[test]
fn first_piece_of_a_stream_is_read_a_page_at_a_time() {
    use super::{cold_piece_reads, COLD_PROBE, COLD_READ_FIRST};
    let first: Vec<_> = cold_piece_reads(3..3 + COLD_READ_FIRST, true).collect();
    assert_eq!(first.len(), COLD_READ_FIRST / COLD_PROBE);
    assert!(first.windows(2).all(|w| w[0].end == w[1].start && w[0].len() == COLD_PROBE));
    assert_eq!((first[0].start, first.last().map(|r| r.end)), (3, Some(3 + COLD_READ_FIRST)));
    assert_eq!(
        cold_piece_reads(5..5 + COLD_PROBE + 1, true).collect::<Vec<_>>(),
        vec![5..5 + COLD_PROBE, 5 + COLD_PROBE..6 + COLD_PROBE]
    );
    assert_eq!(cold_piece_reads(10..5000, false).collect::<Vec<_>>(), vec![10..5000]);
    assert_eq!(cold_piece_reads(7..7, true).count(), 0);
}
