//! The server as Tessera's S3 backend sees it: `object_store`'s `AmazonS3` client (SigV4,
//! path-style, plain HTTP) against an in-process `S3Server`. Covers the operations the engine
//! uses, s3s-fs's conformance (fixed where Tessera depends on it) and each fault kind as the
//! client observes it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion, WriteMultipart,
};
use tessera_s3_server::{FaultKind, Faults};

use crate::common::{BUCKET, client, client_with, start};

fn md5_hex(data: &[u8]) -> String {
    use s3s::crypto::Checksum;
    let mut h = s3s::crypto::Md5::new();
    h.update(data);
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn create() -> PutOptions {
    PutOptions { mode: PutMode::Create, ..PutOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_get_range_head_copy_delete() {
    let (_dir, server) = start();
    let s3 = client(&server);
    let path = Path::from("arr/__fragments/f1/data.bin");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let put = s3.put(&path, PutPayload::from(data.clone())).await.unwrap();
    let etag = put.e_tag.clone().unwrap();
    assert_eq!(etag.trim_matches('"'), md5_hex(&data), "single-part ETag is the MD5");

    let got = s3.get(&path).await.unwrap();
    assert_eq!(got.meta.size, 10_000);
    assert_eq!(got.meta.e_tag.as_deref(), Some(etag.as_str()));
    assert_eq!(got.bytes().await.unwrap(), Bytes::from(data.clone()));

    assert_eq!(s3.get_range(&path, 100..356).await.unwrap(), &data[100..356]);
    let ranges = s3.get_ranges(&path, &[0..1, 9_990..10_000]).await.unwrap();
    assert_eq!(ranges[1], &data[9_990..]);
    let suffix = GetOptions { range: Some(GetRange::Suffix(10)), ..GetOptions::default() };
    assert_eq!(s3.get_opts(&path, suffix).await.unwrap().bytes().await.unwrap(), &data[9_990..]);
    let offset = GetOptions { range: Some(GetRange::Offset(9_995)), ..GetOptions::default() };
    assert_eq!(s3.get_opts(&path, offset).await.unwrap().bytes().await.unwrap(), &data[9_995..]);

    let head = s3.head(&path).await.unwrap();
    assert_eq!((head.size, head.e_tag.as_deref()), (10_000, Some(etag.as_str())));

    let copy = Path::from("arr/copy.bin");
    s3.copy(&path, &copy).await.unwrap();
    assert_eq!(s3.get(&copy).await.unwrap().bytes().await.unwrap(), Bytes::from(data));

    s3.delete(&path).await.unwrap();
    assert!(matches!(s3.head(&path).await, Err(object_store::Error::NotFound { .. })));
    assert!(matches!(s3.get(&path).await, Err(object_store::Error::NotFound { .. })));
    s3.delete(&path).await.unwrap(); // deleting a missing key succeeds, as on S3

    let counts = server.counts();
    assert_eq!(counts.requests_of("PutObject"), 1);
    assert_eq!(counts.requests_of("CopyObject"), 1);
    assert!(counts.requests_of("GetObject") >= 5);
    assert_eq!(counts.status(404), 2);
}

/// Puts a one-byte object at each of `keys`, 16 at a time.
async fn put_all(s3: &Arc<AmazonS3>, keys: &[String]) {
    futures::stream::iter(keys.to_vec())
        .map(|k| {
            let s3 = s3.clone();
            async move { s3.put(&Path::from(k.as_str()), PutPayload::from_static(b"x")).await }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_with_delimiter_and_pagination_beyond_1000_keys() {
    let (_dir, server) = start();
    let s3 = Arc::new(client(&server));
    // 1 100 keys in one "folder" (more than a ListObjectsV2 page), plus nested prefixes.
    let mut keys: Vec<String> = (0..1100).map(|i| format!("arr/__fragments/{i:05}")).collect();
    keys.extend(["arr/__schema/s1", "arr/__schema/s2", "arr/__meta/m/x", "arr/top"].map(String::from));
    put_all(&s3, &keys).await;

    let listed: BTreeSet<String> =
        s3.list(Some(&Path::from("arr"))).map_ok(|m| m.location.to_string()).try_collect().await.unwrap();
    assert_eq!(listed, keys.iter().cloned().collect::<BTreeSet<_>>());
    assert!(server.counts().requests_of("ListObjectsV2") >= 2, "the listing took more than one page");

    let top = s3.list_with_delimiter(Some(&Path::from("arr"))).await.unwrap();
    let prefixes: Vec<String> = top.common_prefixes.iter().map(ToString::to_string).collect();
    assert_eq!(prefixes, ["arr/__fragments", "arr/__meta", "arr/__schema"]);
    let objects: Vec<String> = top.objects.iter().map(|m| m.location.to_string()).collect();
    assert_eq!(objects, ["arr/top"]);

    let after: Vec<String> = s3
        .list_with_offset(Some(&Path::from("arr/__fragments")), &Path::from("arr/__fragments/01097"))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(after, ["arr/__fragments/01098", "arr/__fragments/01099"]);

    // Bulk delete (DeleteObjects) of the whole fragment folder.
    let doomed = s3.list(Some(&Path::from("arr/__fragments"))).map_ok(|m| m.location).boxed();
    let deleted: Vec<Path> = s3.delete_stream(doomed).try_collect().await.unwrap();
    assert_eq!(deleted.len(), 1100);
    assert!(server.counts().requests_of("DeleteObjects") >= 2, "1 100 keys need two bulk deletes");
    let rest: Vec<String> =
        s3.list(Some(&Path::from("arr"))).map_ok(|m| m.location.to_string()).try_collect().await.unwrap();
    assert_eq!(rest.len(), 4, "{rest:?}");
}

/// s3s-fs stat'ed every file it found in the folder and answered 500 when one had been
/// deleted in between, so a listing beside deletes (a vacuum listing the next page while the
/// page before is being deleted) failed, and kept failing on retries. Listings here run
/// beside single and bulk deletes of the same folder: none may fail or be retried, and each
/// lists only keys that were written, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_beside_deletes_never_fail() {
    let (_dir, server) = start();
    let s3 = Arc::new(client(&server));
    let keys: Vec<String> = (0..3000).map(|i| format!("arr/__fragments/{i:05}")).collect();
    put_all(&s3, &keys).await;
    let written: BTreeSet<String> = keys.iter().cloned().collect();

    let deleter = {
        let s3 = s3.clone();
        let keys = keys.clone();
        tokio::spawn(async move {
            // The first half one request per key, the second half in bulk.
            let (single, bulk) = keys.split_at(keys.len() / 2);
            let bulk: Vec<Path> = bulk.iter().map(|k| Path::from(k.as_str())).collect();
            futures::stream::iter(single.to_vec())
                .map(|k| {
                    let s3 = s3.clone();
                    async move { s3.delete(&Path::from(k.as_str())).await }
                })
                .buffer_unordered(4)
                .try_collect::<Vec<_>>()
                .await
                .unwrap();
            let doomed = futures::stream::iter(bulk.into_iter().map(Ok)).boxed();
            s3.delete_stream(doomed).try_collect::<Vec<_>>().await.unwrap();
        })
    };
    let mut listings = 0;
    while !deleter.is_finished() {
        let listed: Vec<String> = s3
            .list(Some(&Path::from("arr/__fragments")))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        assert!(listed.windows(2).all(|w| w[0] < w[1]), "a listing is in key order without repeats");
        assert!(listed.iter().all(|k| written.contains(k)), "a listing names only written keys");
        let top = s3.list_with_delimiter(Some(&Path::from("arr"))).await.unwrap();
        assert!(top.common_prefixes.len() <= 1);
        listings += 1;
    }
    deleter.await.unwrap();
    assert!(listings > 0);
    let rest: Vec<_> = s3.list(Some(&Path::from("arr"))).try_collect().await.unwrap();
    assert!(rest.is_empty(), "{} keys left", rest.len());
    assert_eq!(
        server.counts().status(500),
        0,
        "no listing failed, not even one that a retry hid ({listings} listings)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_upload_of_20_mib() {
    let (_dir, server) = start();
    let s3 = client(&server);
    let path = Path::from("big/object.bin");
    let data: Vec<u8> = (0..20u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let upload = s3.put_multipart(&path).await.unwrap();
    let mut writer = WriteMultipart::new_with_chunk_size(upload, 5 << 20);
    for chunk in data.chunks(1 << 20) {
        writer.write(chunk);
    }
    let result = writer.finish().await.unwrap();
    assert!(result.e_tag.unwrap().trim_matches('"').ends_with("-4"), "multipart ETag is md5-of-md5s-PARTS");
    let got = s3.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(got.len(), data.len());
    assert!(got == data, "multipart object differs from what was written");
    let counts = server.counts();
    assert_eq!(counts.requests_of("UploadPart"), 4);
    assert_eq!(counts.requests_of("CompleteMultipartUpload"), 1);
}

/// s3s-fs checks `If-None-Match: *` and then writes, so racing creates could all succeed;
/// the store's per-key lock makes exactly one win. 1 MiB bodies keep the write window wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_create_race_has_exactly_one_winner() {
    let (_dir, server) = start();
    let s3 = Arc::new(client(&server));
    for round in 0..3 {
        let path = Path::from(format!("arr/__commits/c{round}"));
        let barrier = Arc::new(tokio::sync::Barrier::new(12));
        let tasks: Vec<_> = (0..12u8)
            .map(|i| {
                let (s3, path, barrier) = (s3.clone(), path.clone(), barrier.clone());
                tokio::spawn(async move {
                    let body = vec![i; 1 << 20];
                    barrier.wait().await;
                    (i, s3.put_opts(&path, PutPayload::from(body), create()).await)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                (i, Ok(_)) => winners.push(i),
                (_, Err(object_store::Error::AlreadyExists { .. })) => {}
                (i, Err(e)) => panic!("racer {i}: unexpected error {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let got = s3.get(&path).await.unwrap().bytes().await.unwrap();
        assert!(got.len() == 1 << 20 && got.iter().all(|b| *b == winners[0]), "round {round}: not the winner's bytes");
    }
    assert_eq!(server.counts().status(412), 33);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_update_and_read_conditions() {
    let (_dir, server) = start();
    let s3 = client(&server);
    let path = Path::from("arr/__latest");
    let v1 = s3.put_opts(&path, PutPayload::from_static(b"one"), create()).await.unwrap();
    let update = |r: &object_store::PutResult| PutOptions {
        mode: PutMode::Update(UpdateVersion { e_tag: r.e_tag.clone(), version: None }),
        ..PutOptions::default()
    };
    let v2 = s3.put_opts(&path, PutPayload::from_static(b"two"), update(&v1)).await.unwrap();
    let stale = s3.put_opts(&path, PutPayload::from_static(b"three"), update(&v1)).await;
    assert!(matches!(stale, Err(object_store::Error::Precondition { .. })), "{stale:?}");
    assert_eq!(s3.get(&path).await.unwrap().bytes().await.unwrap(), &b"two"[..]);

    let get = |o: GetOptions| {
        let s3 = &s3;
        let path = &path;
        async move { s3.get_opts(path, o).await.map(|_| ()) }
    };
    let e2 = v2.e_tag.clone();
    get(GetOptions { if_match: e2.clone(), ..GetOptions::default() }).await.unwrap();
    let r = get(GetOptions { if_match: v1.e_tag.clone(), ..GetOptions::default() }).await;
    assert!(matches!(r, Err(object_store::Error::Precondition { .. })), "{r:?}");
    let r = get(GetOptions { if_none_match: e2.clone(), ..GetOptions::default() }).await;
    assert!(matches!(r, Err(object_store::Error::NotModified { .. })), "{r:?}");
    get(GetOptions { if_none_match: v1.e_tag.clone(), ..GetOptions::default() }).await.unwrap();
    let r = get(GetOptions { if_match: v1.e_tag.clone(), head: true, ..GetOptions::default() }).await;
    assert!(matches!(r, Err(object_store::Error::Precondition { .. })), "HEAD: {r:?}");
}

/// A plain PUT replaces the object atomically (s3s-fs writes a temporary file and renames it),
/// and a GET's ETag always belongs to the bytes it returns (the store's read lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_never_see_partial_objects_or_mismatched_etags() {
    let (_dir, server) = start();
    let s3 = Arc::new(client(&server));
    let path = Path::from("arr/hot");
    const SIZE: usize = 512 << 10;
    s3.put(&path, PutPayload::from(vec![0u8; SIZE])).await.unwrap();
    let writer = {
        let (s3, path) = (s3.clone(), path.clone());
        tokio::spawn(async move {
            for i in 1..=40u8 {
                s3.put(&path, PutPayload::from(vec![i; SIZE])).await.unwrap();
            }
        })
    };
    let mut reads = 0;
    while !writer.is_finished() {
        let got = s3.get(&path).await.unwrap();
        let etag = got.meta.e_tag.clone().unwrap();
        let bytes = got.bytes().await.unwrap();
        assert_eq!(bytes.len(), SIZE, "partial object");
        assert!(bytes.iter().all(|b| *b == bytes[0]), "mixed versions in one object");
        assert_eq!(etag.trim_matches('"'), md5_hex(&bytes), "ETag of another version");
        reads += 1;
    }
    writer.await.unwrap();
    assert!(reads > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_secret_and_missing_bucket_are_rejected() {
    let (_dir, server) = start();
    let bad = client_with(&server, BUCKET, "not-the-secret");
    let r = bad.put(&Path::from("k"), PutPayload::from_static(b"x")).await;
    assert!(r.is_err(), "a request signed with the wrong secret was accepted");
    assert_eq!(server.counts().status(403), 1);

    let missing = client_with(&server, "no-such-bucket", server.secret_key());
    let r = missing.put(&Path::from("k"), PutPayload::from_static(b"x")).await;
    assert!(r.is_err(), "a put into a missing bucket succeeded");
    assert!(!server.root().join("no-such-bucket").exists(), "the put created the bucket");
    server.create_bucket("no-such-bucket").unwrap();
    missing.put(&Path::from("k"), PutPayload::from_static(b"x")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_errors_and_drops_are_retried_by_the_client() {
    let (_dir, server) = start();
    let s3 = client(&server);
    for (kind, faults) in [
        (FaultKind::Error, Faults { seed: 1, error_rate: 0.3, ..Faults::default() }),
        (FaultKind::Error, Faults { seed: 2, error_rate: 0.3, error_status: 500, ..Faults::default() }),
        (FaultKind::Drop, Faults { seed: 3, drop_rate: 0.3, ..Faults::default() }),
    ] {
        server.reset_counts();
        server.set_faults(faults).unwrap();
        for i in 0..30 {
            let path = Path::from(format!("f/{kind:?}/{i}"));
            let body = format!("value {i}");
            s3.put(&path, PutPayload::from(body.clone())).await.unwrap();
            assert_eq!(s3.get(&path).await.unwrap().bytes().await.unwrap(), body.as_bytes());
        }
        let c = server.counts();
        let injected = match kind {
            FaultKind::Error => c.faults.error,
            _ => c.faults.drop,
        };
        assert!(injected >= 5, "{kind:?}: only {injected} faults in {c:?}");
        assert_eq!(c.requests_of("PutObject") + c.requests_of("GetObject"), 60 + injected, "one retry per fault");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_requests_are_delayed_and_filters_apply() {
    let (_dir, server) = start();
    let s3 = client(&server);
    s3.put(&Path::from("a/slow-me"), PutPayload::from_static(b"x")).await.unwrap();
    s3.put(&Path::from("a/fast"), PutPayload::from_static(b"y")).await.unwrap();
    let faults = Faults {
        slow_rate: 1.0,
        slow_ms: 300,
        methods: vec!["GetObject".into()],
        key_contains: Some("slow".into()),
        ..Faults::default()
    };
    server.set_faults(faults).unwrap();
    let t = Instant::now();
    s3.get(&Path::from("a/fast")).await.unwrap();
    s3.head(&Path::from("a/slow-me")).await.unwrap();
    assert!(t.elapsed() < Duration::from_millis(250), "unfiltered requests were slowed");
    let t = Instant::now();
    s3.get(&Path::from("a/slow-me")).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(server.counts().faults.slow, 1);
}

/// The ambiguous case (crate docs): the conditional create is applied, the answer is lost, the
/// client retries and is told `AlreadyExists` about its own object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_after_on_conditional_create_reports_already_exists_for_own_write() {
    let (_dir, server) = start();
    let s3 = client(&server);
    let faults = Faults { drop_after_rate: 1.0, conditional_only: true, limit: Some(1), ..Faults::default() };
    server.set_faults(faults).unwrap();
    let path = Path::from("arr/__commits/c1");
    let r = s3.put_opts(&path, PutPayload::from_static(b"mine"), create()).await;
    assert!(matches!(r, Err(object_store::Error::AlreadyExists { .. })), "{r:?}");
    assert_eq!(s3.get(&path).await.unwrap().bytes().await.unwrap(), &b"mine"[..], "the write did happen");
    let c = server.counts();
    assert_eq!((c.faults.drop_after, c.requests_of("PutObject"), c.status(412)), (1, 2, 1));

    // A plain (unconditional) put under drop_after is retried and simply succeeds.
    server.set_faults(Faults { drop_after_rate: 1.0, limit: Some(1), ..Faults::default() }).unwrap();
    s3.put(&Path::from("p"), PutPayload::from_static(b"v")).await.unwrap();
    assert_eq!(server.counts().faults.drop_after, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_shuts_down_promptly_with_idle_client_connections() {
    let (_dir, server) = start();
    let s3 = client(&server);
    s3.put(&Path::from("k"), PutPayload::from_static(b"x")).await.unwrap();
    let endpoint = server.endpoint();
    let t = Instant::now();
    drop(server);
    assert!(t.elapsed() < Duration::from_secs(3), "shutdown took {:?}", t.elapsed());
    let addr = endpoint.trim_start_matches("http://");
    assert!(std::net::TcpStream::connect(addr).is_err(), "still listening after drop");
}

/// Keys are paths in s3s-fs, so a key that is a prefix of other keys is a folder. S3 treats
/// such a key as a missing object; s3s-fs answered 500 (retried by clients) for HEAD, GET and
/// DELETE of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_keys_behave_like_missing_objects() {
    let (_dir, server) = start();
    let s3 = client(&server);
    s3.put(&Path::from("arr/dir/x"), PutPayload::from_static(b"x")).await.unwrap();
    let dir = Path::from("arr/dir");
    let t = Instant::now();
    assert!(matches!(s3.head(&dir).await, Err(object_store::Error::NotFound { .. })));
    assert!(matches!(s3.get(&dir).await, Err(object_store::Error::NotFound { .. })));
    s3.delete(&dir).await.unwrap();
    let deleted: Vec<Path> =
        s3.delete_stream(futures::stream::iter([Ok(dir.clone())]).boxed()).try_collect().await.unwrap();
    assert_eq!(deleted, std::slice::from_ref(&dir));
    assert_eq!(s3.get(&Path::from("arr/dir/x")).await.unwrap().bytes().await.unwrap(), &b"x"[..]);

    // A key that would need a path to be both a file and a folder cannot be stored here: the
    // answer is an immediate 400 naming the conflict, not a 500 the client retries.
    let r = s3.put(&dir, PutPayload::from_static(b"y")).await;
    assert!(r.as_ref().is_err_and(|e| e.to_string().contains("file and a folder")), "{r:?}");
    let r = s3.put(&Path::from("arr/dir/x/y"), PutPayload::from_static(b"y")).await;
    assert!(r.as_ref().is_err_and(|e| e.to_string().contains("file and a folder")), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "errors were retried: {:?}", t.elapsed());
    assert_eq!(server.counts().status(500), 0);

    // Once the keys under it are gone, the prefix may become an object.
    s3.delete(&Path::from("arr/dir/x")).await.unwrap();
    s3.put(&dir, PutPayload::from_static(b"now a file")).await.unwrap();
    assert_eq!(s3.get(&dir).await.unwrap().bytes().await.unwrap(), &b"now a file"[..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_with_escaped_characters_and_conditional_copy() {
    let (_dir, server) = start();
    let s3 = client(&server);
    let odd = Path::from("arr/a b=c&d/ü+%.bin");
    s3.put(&odd, PutPayload::from_static(b"odd")).await.unwrap();
    assert_eq!(s3.get(&odd).await.unwrap().bytes().await.unwrap(), &b"odd"[..]);
    let listed: Vec<Path> = s3.list(Some(&Path::from("arr"))).map_ok(|m| m.location).try_collect().await.unwrap();
    assert_eq!(listed, std::slice::from_ref(&odd));

    // copy_if_not_exists through a multipart upload (UploadPartCopy, then
    // CompleteMultipartUpload with If-None-Match: *), the conditional copy object_store offers.
    let s3 = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(server.endpoint())
        .with_allow_http(true)
        .with_access_key_id(server.access_key())
        .with_secret_access_key(server.secret_key())
        .with_region("us-east-1")
        .with_bucket_name(crate::common::BUCKET)
        .with_copy_if_not_exists(object_store::aws::S3CopyIfNotExists::Multipart)
        .build()
        .unwrap();
    let (a, b, target) = (Path::from("arr/a"), Path::from("arr/b"), Path::from("arr/target"));
    s3.put(&a, PutPayload::from_static(b"from a")).await.unwrap();
    s3.put(&b, PutPayload::from_static(b"from b")).await.unwrap();
    s3.copy_if_not_exists(&a, &target).await.unwrap();
    let r = s3.copy_if_not_exists(&b, &target).await;
    assert!(matches!(r, Err(object_store::Error::AlreadyExists { .. })), "{r:?}");
    assert_eq!(s3.get(&target).await.unwrap().bytes().await.unwrap(), &b"from a"[..]);
    assert_eq!(server.counts().requests_of("UploadPartCopy"), 2);
}

/// Names under the server's root (where s3s-fs keeps uploads in progress) that belong to
/// multipart uploads: parts, part records, uploads.
fn upload_files(server: &tessera_s3_server::S3Server) -> Vec<String> {
    std::fs::read_dir(server.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".upload"))
        .collect()
}

/// Completion joins the parts by renaming and in-kernel copies instead of s3s-fs's copy: the
/// object must still be the parts in order, its ETag the MD5 of the parts' MD5s, and nothing
/// of the upload may stay behind (parts the completion does not name are discarded, as on S3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_joins_the_named_parts_in_order_and_leaves_nothing_behind() {
    use object_store::multipart::MultipartStore;
    let (_dir, server) = start();
    let s3 = client(&server);
    let path = Path::from("big/joined.bin");
    let parts: Vec<Vec<u8>> =
        (0..4u8).map(|p| (0..(5u32 << 20) + 17 * u32::from(p)).map(|i| (i % 253) as u8 ^ p).collect()).collect();
    let id = s3.create_multipart(&path).await.unwrap();
    let mut ids = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        ids.push(s3.put_part(&path, &id, i, PutPayload::from(p.clone())).await.unwrap());
    }
    // Only the first three are named: the fourth is discarded.
    let done = s3.complete_multipart(&path, &id, ids[..3].to_vec()).await.unwrap();
    let want: Vec<u8> = parts[..3].concat();
    assert!(s3.get(&path).await.unwrap().bytes().await.unwrap() == want, "object differs from parts 1-3");
    let mut all = Vec::new();
    for p in &parts[..3] {
        use s3s::crypto::Checksum;
        let mut h = s3s::crypto::Md5::new();
        h.update(p);
        all.extend_from_slice(&h.finalize());
    }
    let e_tag = format!("{}-3", md5_hex(&all));
    assert_eq!(done.e_tag.as_deref().map(|e| e.trim_matches('"')), Some(e_tag.as_str()));
    let head = s3.head(&path).await.unwrap();
    assert_eq!(head.e_tag.as_deref().map(|e| e.trim_matches('"')), Some(e_tag.as_str()), "HEAD gives the same ETag");
    assert_eq!(head.size, want.len() as u64);
    assert_eq!(upload_files(&server), Vec::<String>::new(), "leftovers of the upload");
}

/// S3 refuses a completion naming a part by an ETag the part does not have (s3s-fs did not
/// check), and a part under 5 MiB that is not the last; the object is then left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_refuses_a_wrong_part_etag_or_a_small_middle_part() {
    use object_store::multipart::{MultipartStore, PartId};
    let (_dir, server) = start();
    let s3 = client(&server);
    let path = Path::from("big/checked.bin");
    s3.put(&path, PutPayload::from_static(b"old")).await.unwrap();
    let big: Vec<u8> = vec![7; 5 << 20];
    let id = s3.create_multipart(&path).await.unwrap();
    let p1 = s3.put_part(&path, &id, 0, PutPayload::from(big.clone())).await.unwrap();
    let p2 = s3.put_part(&path, &id, 1, PutPayload::from_static(b"tail")).await.unwrap();
    let wrong = PartId { content_id: format!("\"{}\"", md5_hex(b"something else")) };
    let err = s3.complete_multipart(&path, &id, vec![p1.clone(), wrong]).await.unwrap_err();
    assert!(err.to_string().contains("InvalidPart"), "{err}");
    assert_eq!(&s3.get(&path).await.unwrap().bytes().await.unwrap()[..], b"old");
    // A small part before the last.
    let small = s3.create_multipart(&path).await.unwrap();
    let s1 = s3.put_part(&path, &small, 0, PutPayload::from_static(b"tiny")).await.unwrap();
    let s2 = s3.put_part(&path, &small, 1, PutPayload::from(big.clone())).await.unwrap();
    let err = s3.complete_multipart(&path, &small, vec![s1, s2]).await.unwrap_err();
    assert!(err.to_string().contains("EntityTooSmall"), "{err}");
    assert_eq!(&s3.get(&path).await.unwrap().bytes().await.unwrap()[..], b"old");
    s3.abort_multipart(&path, &small).await.unwrap();
    // The parts are intact after the refusals: the right completion succeeds.
    s3.complete_multipart(&path, &id, vec![p1, p2]).await.unwrap();
    let got = s3.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(got.len(), big.len() + 4);
    assert!(got[..big.len()] == big[..] && &got[big.len()..] == b"tail");
}

/// The data file of the one upload in progress on `server`, if it has one.
fn data_file(server: &tessera_s3_server::S3Server) -> Option<std::path::PathBuf> {
    upload_files(server).into_iter().find(|n| n.ends_with(".data")).map(|n| server.root().join(n))
}

fn inode(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().ino()
}

/// Parts of one size (the last smaller), uploaded at once and out of order as clients do, are
/// stored at their final offsets: the completed object is the upload's data file itself (same
/// inode), not a copy, and holds the parts in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parts_of_one_size_become_the_object_without_a_copy() {
    use object_store::multipart::MultipartStore;
    let (_dir, server) = start();
    let s3 = client(&server);
    let path = Path::from("big/in-place.bin");
    let mut parts: Vec<Vec<u8>> = (0..3u8).map(|p| (0..5u32 << 20).map(|i| (i % 251) as u8 ^ p).collect()).collect();
    parts.push(b"the tail".to_vec());
    let id = s3.create_multipart(&path).await.unwrap();
    // Part 3 first: it fixes the slot size; then the others at once.
    let third = s3.put_part(&path, &id, 2, PutPayload::from(parts[2].clone())).await.unwrap();
    let others =
        futures::future::join_all([0, 1, 3].map(|i| s3.put_part(&path, &id, i, PutPayload::from(parts[i].clone()))));
    let mut ids: Vec<_> = others.await.into_iter().map(Result::unwrap).collect();
    ids.insert(2, third);
    let data = data_file(&server).expect("parts of one size go to the upload's data file");
    let before = inode(&data);
    s3.complete_multipart(&path, &id, ids).await.unwrap();
    let object = server.root().join(BUCKET).join("big/in-place.bin");
    assert_eq!(inode(&object), before, "the object is the data file, renamed");
    assert!(s3.get(&path).await.unwrap().bytes().await.unwrap() == parts.concat(), "object differs from the parts");
    assert_eq!(upload_files(&server), Vec::<String>::new(), "leftovers of the upload");
}

/// When the first part stored is the small last one, larger parts cannot go to their slots:
/// they are stored on their own and completion copies them, with the same result (also over
/// the temporary file of a completion that was interrupted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parts_larger_than_the_first_are_stored_apart_and_copied() {
    use object_store::multipart::MultipartStore;
    let (_dir, server) = start();
    let s3 = client(&server);
    let path = Path::from("big/copied.bin");
    let parts: Vec<Vec<u8>> = vec![vec![1; 5 << 20], vec![2; 5 << 20], b"tail first".to_vec()];
    let id = s3.create_multipart(&path).await.unwrap();
    let tail = s3.put_part(&path, &id, 2, PutPayload::from(parts[2].clone())).await.unwrap();
    let first = s3.put_part(&path, &id, 0, PutPayload::from(parts[0].clone())).await.unwrap();
    let second = s3.put_part(&path, &id, 1, PutPayload::from(parts[1].clone())).await.unwrap();
    // What a server killed in the middle of an earlier completion of this upload left behind
    // does not stand in the way.
    std::fs::write(server.root().join(format!(".tmp.tessera-complete-{id}")), b"half a copy").unwrap();
    let done = s3.complete_multipart(&path, &id, vec![first, second, tail]).await.unwrap();
    assert_eq!(server.counts().status(500), 0, "the completion failed before a retry");
    assert!(s3.get(&path).await.unwrap().bytes().await.unwrap() == parts.concat(), "object differs from the parts");
    let head = s3.head(&path).await.unwrap();
    assert_eq!(head.e_tag, done.e_tag);
    assert_eq!(upload_files(&server), Vec::<String>::new(), "leftovers of the upload");
}

/// Two uploads of one part number at once (a client's retry racing the original): the part
/// holds one of them whole, never a mix, and completion accepts exactly the ETag of that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_uploads_of_one_part_leave_one_of_them_whole() {
    use object_store::multipart::MultipartStore;
    let (_dir, server) = start();
    let s3 = client(&server);
    for round in 0..4u8 {
        let path = Path::from(format!("big/race-{round}.bin"));
        let a: Vec<u8> = vec![b'a' ^ round; 6 << 20];
        let b: Vec<u8> = (0..6u32 << 20).map(|i| (i % 241) as u8).collect();
        let id = s3.create_multipart(&path).await.unwrap();
        let tail = s3.put_part(&path, &id, 1, PutPayload::from_static(b"end")).await;
        let tail = tail.unwrap();
        let (pa, pb) = tokio::join!(
            s3.put_part(&path, &id, 0, PutPayload::from(a.clone())),
            s3.put_part(&path, &id, 0, PutPayload::from(b.clone()))
        );
        let (pa, pb) = (pa.unwrap(), pb.unwrap());
        let with_a = s3.complete_multipart(&path, &id, vec![pa, tail.clone()]).await;
        let want = if with_a.is_ok() {
            a
        } else {
            s3.complete_multipart(&path, &id, vec![pb, tail]).await.unwrap();
            b
        };
        let got = s3.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(got.len(), want.len() + 3);
        assert!(
            got[..want.len()] == want[..] && &got[want.len()..] == b"end",
            "round {round}: a mix or the wrong part"
        );
    }
    assert_eq!(upload_files(&server), Vec::<String>::new(), "leftovers of the uploads");
}

/// Parts written at their final offsets stay right when UploadPart requests fail, are dropped
/// before they run, or run and lose their answer (the client then uploads the same part again
/// over its own bytes): every object completes whole, and nothing of the uploads stays behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_in_place_survive_failed_dropped_and_repeated_parts() {
    let (_dir, server) = start();
    let s3 = client(&server);
    let only_parts = || vec!["UploadPart".to_string()];
    for (i, faults) in [
        // The first two UploadParts of each upload meet the fault (their order is the client's).
        Faults { error_rate: 1.0, limit: Some(2), methods: only_parts(), ..Faults::default() },
        Faults { drop_rate: 1.0, limit: Some(2), methods: only_parts(), ..Faults::default() },
        Faults { drop_after_rate: 1.0, limit: Some(2), methods: only_parts(), ..Faults::default() },
    ]
    .into_iter()
    .enumerate()
    {
        server.reset_counts();
        server.set_faults(faults).unwrap();
        let path = Path::from(format!("big/faulty-{i}.bin"));
        let data: Vec<u8> =
            (0..(23u32 << 20) + 12_345).map(|k| (k.wrapping_mul(2_654_435_761) >> 24) as u8 ^ i as u8).collect();
        let mut writer = WriteMultipart::new_with_chunk_size(s3.put_multipart(&path).await.unwrap(), 5 << 20);
        for chunk in data.chunks(3 << 20) {
            writer.write(chunk);
        }
        writer.finish().await.unwrap();
        server.set_faults(Faults::default()).unwrap();
        let got = s3.get(&path).await.unwrap().bytes().await.unwrap();
        assert!(got == data, "case {i}: the object differs from what was written");
        let c = server.counts();
        let injected = c.faults.error + c.faults.drop + c.faults.drop_after;
        assert!(injected == 2 && c.requests_of("UploadPart") == 5 + injected, "case {i}: {c:?}");
    }
    assert_eq!(upload_files(&server), Vec::<String>::new(), "leftovers of the uploads");
}
