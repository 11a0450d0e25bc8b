//! Execute with a row limit over a MySQL backend. MySQL sends a result set whole (the bridge
//! opens no server-side cursor), so the rows beyond the limit are kept and handed out on the
//! portal's next Executes, each batch ending with PortalSuspended and the last with
//! `SELECT n` for the rows of that batch, as a PostgreSQL portal does (PostgreSQL docs, "Extended
//! Query": Execute's maximum row count).

use crate::protocol::pg::{decode_frame, BackendMessage};

/// The messages an Execute produced (DataRows then CommandComplete), limited to `max_rows`
/// rows (0: no limit): what fits is appended to `out` with PortalSuspended; the DataRows left
/// over are returned for later Executes. Responses that end in anything but CommandComplete (an
/// error) are sent whole.
#[must_use]
pub fn limit_rows(messages: &[u8], max_rows: usize, out: &mut Vec<u8>) -> Option<Vec<u8>> {
    let frames = frame_bounds(messages);
    let ends_complete = frames.last().is_some_and(|(tag, _, _)| *tag == b'C');
    let rows = frames.iter().filter(|(tag, _, _)| *tag == b'D').count();
    if max_rows == 0 || rows <= max_rows || !ends_complete {
        out.extend_from_slice(messages);
        return None;
    }
    let mut rest = Vec::new();
    let mut sent = 0;
    for (tag, start, end) in frames {
        let bytes = messages.get(start..end).unwrap_or_default();
        match tag {
            b'D' if sent < max_rows => {
                out.extend_from_slice(bytes);
                sent += 1;
            }
            b'D' => rest.extend_from_slice(bytes),
            // The CommandComplete counts every row: the final batch gets its own.
            b'C' => {}
            _ => out.extend_from_slice(bytes),
        }
    }
    out.extend_from_slice(&[b's', 0, 0, 0, 4]);
    Some(rest)
}

/// The next batch of kept rows (`max_rows` of them, all when 0) into `out`; returns the rows
/// still kept, `None` when this batch ended the portal with CommandComplete.
#[must_use]
pub fn resume_rows(kept: &[u8], max_rows: usize, out: &mut Vec<u8>) -> Option<Vec<u8>> {
    let frames = frame_bounds(kept);
    let take = if max_rows == 0 { frames.len() } else { max_rows.min(frames.len()) };
    let split = frames.get(take).map_or(kept.len(), |(_, start, _)| *start);
    out.extend_from_slice(kept.get(..split).unwrap_or_default());
    if take < frames.len() {
        out.extend_from_slice(&[b's', 0, 0, 0, 4]);
        return Some(kept.get(split..).unwrap_or_default().to_vec());
    }
    // A tag built here from a number cannot fail to encode.
    let _ = BackendMessage::CommandComplete(&format!("SELECT {take}")).encode(out);
    None
}

/// (tag, start, end) of each whole message in `messages`.
fn frame_bounds(messages: &[u8]) -> Vec<(u8, usize, usize)> {
    let mut frames = Vec::new();
    let mut pos = 0;
    while let Ok(Some(f)) = decode_frame(messages.get(pos..).unwrap_or_default(), usize::MAX) {
        frames.push((f.tag, pos, pos + f.total_len));
        pos += f.total_len;
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::pg::backend::encode_data_row;

    fn response(rows: usize) -> Vec<u8> {
        let mut m = Vec::new();
        for i in 0..rows {
            encode_data_row(&[Some(i.to_string().as_bytes())], &mut m).unwrap();
        }
        BackendMessage::CommandComplete(&format!("SELECT {rows}")).encode(&mut m).unwrap();
        m
    }

    fn tags(m: &[u8]) -> String {
        frame_bounds(m).iter().map(|(t, _, _)| char::from(*t)).collect()
    }

    #[test]
    fn batches_with_portal_suspended() {
        let mut out = Vec::new();
        let kept = limit_rows(&response(5), 2, &mut out).expect("rows kept");
        assert_eq!(tags(&out), "DDs");
        out.clear();
        let kept = resume_rows(&kept, 2, &mut out).expect("more kept");
        assert_eq!(tags(&out), "DDs");
        out.clear();
        assert!(resume_rows(&kept, 2, &mut out).is_none());
        assert_eq!(tags(&out), "DC");
        assert!(out.ends_with(b"SELECT 1\0"));
    }

    #[test]
    fn unlimited_or_small_results_pass_whole() {
        for (rows, max) in [(3, 0), (3, 3), (0, 1)] {
            let mut out = Vec::new();
            let r = response(rows);
            assert!(limit_rows(&r, max, &mut out).is_none());
            assert_eq!(out, r);
        }
        // An error ends the response: nothing is held back.
        let mut r = response(3);
        r.truncate(r.len() - 14); // drop CommandComplete "SELECT 3"
        crate::protocol::pg::encode_error(crate::protocol::pg::Severity::Error, "22012", "x", &mut r);
        let mut out = Vec::new();
        assert!(limit_rows(&r, 1, &mut out).is_none());
        assert_eq!(tags(&out), "DDDE");
        // Resuming with no limit sends the rest and completes.
        let mut out = Vec::new();
        let kept = limit_rows(&response(4), 1, &mut out).unwrap();
        out.clear();
        assert!(resume_rows(&kept, 0, &mut out).is_none());
        assert_eq!(tags(&out), "DDDC");
        assert!(out.ends_with(b"SELECT 3\0"));
    }
}
