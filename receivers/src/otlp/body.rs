//! An OTLP/HTTP request body read into one contiguous buffer, reusing buffers from request
//! to request.
//!
//! Why not `collect()`: it holds every frame hyper hands over until the last one arrives, so
//! hyper, whose read buffer those frames are slices of, must allocate a fresh buffer for
//! each read; the frames are then copied into yet another fresh buffer of the body's size.
//! The allocator returns such large blocks to the kernel soon after they are freed, so each
//! of those buffers is paid for again in page faults (the kernel zeroing every page): on a
//! stream of exports of a few hundred KiB to a few MiB, more CPU than the decoding itself.
//!
//! Here each frame is copied into a buffer taken from a small [`BodyPool`] and dropped at
//! once, so hyper's read buffer is free again before its next read and is reused in place;
//! once a request is answered its body's buffer goes back to the pool (when nothing holds
//! it any more). A body that arrives as one frame holding all of it is kept as it is, with
//! no copy.

use std::sync::Mutex;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt as _;

/// Buffers a pool keeps.
const POOL_BUFFERS: usize = 4;

/// Largest buffer a pool keeps (a larger body's buffer is freed): with [`POOL_BUFFERS`],
/// what a pool holds between requests stays under 32 MiB whatever it is sent.
const POOL_MAX_CAPACITY: usize = 8 * 1024 * 1024;

/// Request body buffers kept for the next requests (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct BodyPool {
    free: Mutex<Vec<BytesMut>>,
}

impl BodyPool {
    /// An empty buffer with room for at least `want` bytes: a kept one when there is one.
    fn take(&self, want: usize) -> BytesMut {
        let kept = self.free.lock().ok().and_then(|mut v| {
            let i = v.iter().position(|b| b.capacity() >= want).or(v.len().checked_sub(1))?;
            Some(v.swap_remove(i))
        });
        let mut b = kept.unwrap_or_default();
        b.reserve(want);
        b
    }

    /// Gives a body back once its request is answered: its buffer is kept when nothing else
    /// holds it (every record built over it dropped) and it is not too large.
    pub(crate) fn put(&self, body: Bytes) {
        let Ok(mut b) = body.try_into_mut() else { return };
        if b.capacity() > POOL_MAX_CAPACITY || b.capacity() == 0 {
            return;
        }
        b.clear();
        if let Ok(mut v) = self.free.lock()
            && v.len() < POOL_BUFFERS
        {
            v.push(b);
        }
    }
}

/// Why a body could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// More than the limit.
    TooLarge,
    /// The connection failed while the body was read.
    Body(axum::Error),
}

/// Reads `body` (at most `limit` bytes) into one buffer; `declared` is its
/// `Content-Length`, when sent (the buffer is sized for it).
pub(crate) async fn read(
    mut body: Body,
    limit: usize,
    declared: Option<usize>,
    pool: &BodyPool,
) -> Result<Bytes, ReadError> {
    let mut buf: Option<BytesMut> = None;
    let mut whole: Option<Bytes> = None;
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(ReadError::Body)?.into_data() else { continue };
        total = total.saturating_add(data.len());
        if total > limit {
            return Err(ReadError::TooLarge);
        }
        if buf.is_none() && whole.is_none() && declared == Some(data.len()) {
            // All of it in one frame: kept as it is.
            whole = Some(data);
            continue;
        }
        let b = buf.get_or_insert_with(|| {
            let mut b = pool.take(declared.unwrap_or(0).clamp(data.len(), limit));
            if let Some(w) = whole.take() {
                b.extend_from_slice(&w);
            }
            b
        });
        b.extend_from_slice(&data);
        // `data` (a slice of hyper's read buffer) is dropped here, before the next read.
    }
    Ok(match (whole, buf) {
        (Some(w), None) => w,
        (_, Some(b)) => b.freeze(),
        (None, None) => Bytes::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body of these frames, with this `Content-Length`.
    fn body_of(frames: &[&'static [u8]]) -> Body {
        let chunks: Vec<Result<Bytes, std::io::Error>> = frames.iter().map(|f| Ok(Bytes::from_static(f))).collect();
        Body::from_stream(futures_util::stream::iter(chunks))
    }

    async fn read_all(frames: &[&'static [u8]], limit: usize, declared: Option<usize>, pool: &BodyPool) -> Bytes {
        read(body_of(frames), limit, declared, pool).await.unwrap()
    }

    #[tokio::test]
    async fn frames_are_joined_in_order_within_the_limit() {
        let pool = BodyPool::default();
        let parts: &[&[u8]] = &[b"ab", b"", b"cde", b"f"];
        for declared in [None, Some(6), Some(1), Some(100)] {
            assert_eq!(&read_all(parts, 6, declared, &pool).await[..], b"abcdef", "{declared:?}");
        }
        assert_eq!(&read_all(&[b"abcdef"], 6, Some(6), &pool).await[..], b"abcdef");
        assert_eq!(&read_all(&[b"abcdef"], 6, None, &pool).await[..], b"abcdef");
        assert!(read_all(&[], 6, Some(0), &pool).await.is_empty());
        assert!(matches!(read(body_of(parts), 5, Some(6), &pool).await, Err(ReadError::TooLarge)));
        assert!(matches!(read(body_of(&[b"abcdefg"]), 6, Some(7), &pool).await, Err(ReadError::TooLarge)));
    }

    #[tokio::test]
    async fn a_buffer_is_reused_only_once_nothing_holds_it() {
        let pool = BodyPool::default();
        let first = read_all(&[b"abc", b"def"], 64, Some(6), &pool).await;
        let held = first.clone();
        pool.put(first);
        assert!(pool.free.lock().unwrap().is_empty(), "a body still held is not reused");
        let at = held.as_ptr();
        pool.put(held);
        assert_eq!(pool.free.lock().unwrap().len(), 1);
        // The next body is read into the same memory, and reads back its own bytes.
        let second = read_all(&[b"gh", b"ij"], 64, Some(4), &pool).await;
        assert_eq!(&second[..], b"ghij");
        assert_eq!(second.as_ptr(), at);
        assert!(pool.free.lock().unwrap().is_empty());
        // A body kept as its one frame is hyper's memory, not the pool's.
        pool.put(read_all(&[b"one frame"], 64, Some(9), &pool).await);
        assert!(pool.free.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_pool_is_bounded() {
        let pool = BodyPool::default();
        for _ in 0..POOL_BUFFERS + 3 {
            pool.put(BytesMut::with_capacity(16).freeze());
            pool.put(Bytes::from(vec![0u8; 32]));
        }
        assert_eq!(pool.free.lock().unwrap().len(), POOL_BUFFERS);
        let mut big = BytesMut::with_capacity(POOL_MAX_CAPACITY + 1);
        big.extend_from_slice(b"x");
        let pool = BodyPool::default();
        pool.put(big.freeze());
        assert!(pool.free.lock().unwrap().is_empty());
    }
}
