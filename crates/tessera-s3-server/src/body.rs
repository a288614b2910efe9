//! [`FileRange`]: the body of a GET, a byte range of an object's file read in large pieces.
//!
//! s3s-fs streams a GET's body from its file 4 KiB at a time, each piece a round trip through
//! tokio's blocking pool, and keeps reading (and dropping) past the end of a range until the end
//! of the file: on this server's two cores the wake-ups of a 2 MiB range cost more CPU than the
//! client that asked for it. Here the range is read with positioned reads of up to
//! [`PIECE`] bytes, one blocking task each, and the stream ends at the range's end.

use std::fs::File;
use std::future::Future;
use std::io;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures::Stream;
use tokio::task::JoinHandle;

/// Bytes read by one blocking task (1 MiB).
pub(crate) const PIECE: u64 = 1 << 20;

/// The bytes `offset..offset + remaining` of an open file, as a stream of pieces.
#[derive(Debug)]
pub(crate) struct FileRange {
    file: Arc<File>,
    offset: u64,
    remaining: u64,
    reading: Option<JoinHandle<io::Result<Bytes>>>,
}

impl FileRange {
    /// The `len` bytes of `file` from `offset`.
    pub(crate) fn new(file: File, offset: u64, len: u64) -> Self {
        Self { file: Arc::new(file), offset, remaining: len, reading: None }
    }
}

/// Reads exactly `len` bytes of `file` at `offset`; a file that ends first is an error (the
/// object was truncated under the reader, which the key locks rule out).
fn read_piece(file: &File, offset: u64, len: u64) -> io::Result<Bytes> {
    let len = usize::try_from(len).map_err(io::Error::other)?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(Bytes::from(buf))
}

impl Stream for FileRange {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.reading.is_none() {
            if this.remaining == 0 {
                return Poll::Ready(None);
            }
            let (file, offset, len) = (this.file.clone(), this.offset, this.remaining.min(PIECE));
            this.reading = Some(tokio::task::spawn_blocking(move || read_piece(&file, offset, len)));
        }
        let Some(reading) = this.reading.as_mut() else { unreachable!("set above") };
        let done = ready!(Pin::new(reading).poll(cx));
        this.reading = None;
        let piece = match done {
            Ok(Ok(piece)) => piece,
            Ok(Err(e)) => {
                this.remaining = 0;
                return Poll::Ready(Some(Err(e)));
            }
            Err(e) => {
                this.remaining = 0;
                return Poll::Ready(Some(Err(io::Error::other(e))));
            }
        };
        let n = piece.len() as u64;
        this.offset += n;
        this.remaining -= n;
        Poll::Ready(Some(Ok(piece)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let pieces = usize::try_from(self.remaining.div_ceil(PIECE)).unwrap_or(usize::MAX);
        (pieces, Some(pieces))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;
    use std::io::Write;

    #[tokio::test]
    async fn ranges_come_back_whole_and_end_where_they_end() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..(3 * PIECE + 17)).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        for (offset, len) in [(0, 0), (0, data.len() as u64), (5, PIECE), (PIECE - 1, 2 * PIECE + 3), (100, 1)] {
            let body = FileRange::new(f.try_clone().unwrap(), offset, len);
            let pieces: Vec<Bytes> = body.try_collect().await.unwrap();
            assert!(pieces.iter().all(|p| p.len() as u64 <= PIECE && !p.is_empty()));
            let (o, l) = (offset as usize, len as usize);
            assert_eq!(pieces.concat(), &data[o..o + l], "offset {offset} len {len}");
        }
        // A range past the end of the file (a truncated object) is an error, not short data.
        let body = FileRange::new(f.try_clone().unwrap(), data.len() as u64 - 3, 10);
        let got: Result<Vec<Bytes>, _> = body.try_collect().await;
        assert_eq!(got.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }
}
