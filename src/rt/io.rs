//! Buffered socket reads and whole writes over [`Stream`].

use std::io;

use futures_lite::{AsyncReadExt, AsyncWriteExt};

use super::Stream;

/// Reads whatever is available (at most `chunk` bytes) and appends it to `buf`.
/// Returns the number of bytes read; 0 means the peer closed the connection.
pub async fn read_some(stream: &mut Stream, buf: &mut Vec<u8>, chunk: usize) -> io::Result<usize> {
    let start = buf.len();
    buf.resize(start + chunk, 0);
    let res = match buf.get_mut(start..) {
        Some(spare) => stream.read(spare).await,
        None => Ok(0),
    };
    let n = *res.as_ref().unwrap_or(&0);
    buf.truncate(start + n);
    res
}

/// Writes all of `data`.
pub async fn write_all(stream: &mut Stream, data: &[u8]) -> io::Result<()> {
    stream.write_all(data).await
}
