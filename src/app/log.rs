//! Where the router's log lines go and what a failed write costs: stdout or a file (reopened
//! on request, for logrotate), text or JSON lines. A write that fails — a pipe whose reader is
//! gone, a full disk — drops that line and counts it (`sqp_log_lines_dropped_total`); it never
//! panics a core or the signal thread, so the router keeps serving and keeps obeying signals.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

use crate::config::{General, LogFormat};
use crate::metrics::LogDrops;

/// The log destination the global subscriber writes to.
#[derive(Clone)]
pub struct LogSink {
    file: Option<Arc<LogFile>>,
    drops: LogDrops,
}

struct LogFile {
    path: PathBuf,
    handle: Mutex<File>,
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl LogSink {
    /// Writes to `general.log_file` when set, else to stdout.
    pub fn open(general: &General) -> io::Result<Self> {
        let file = match &general.log_file {
            Some(path) => Some(Arc::new(LogFile { path: path.clone(), handle: Mutex::new(open_append(path)?) })),
            None => None,
        };
        Ok(Self { file, drops: LogDrops::default() })
    }

    /// Installs this sink as the process's log subscriber, with `filter` and `general.log_format`.
    pub fn install(&self, general: &General, filter: EnvFilter) {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_target(false)
            .with_writer(self.clone())
            // The subscriber would report its own failed writes on stderr with eprintln!, which
            // panics when stderr is a closed pipe too: the count replaces that report.
            .log_internal_errors(false);
        match general.log_format {
            LogFormat::Text => builder.with_ansi(self.file.is_none()).init(),
            LogFormat::Json => builder.json().init(),
        }
    }

    /// Reopens the log file under its configured path (after logrotate moved the old one away);
    /// a no-op when logging to stdout.
    pub fn reopen(&self) -> io::Result<()> {
        let Some(file) = &self.file else { return Ok(()) };
        let fresh = open_append(&file.path)?;
        *file.handle.lock() = fresh;
        Ok(())
    }

    /// The dropped-lines counter, for the metrics scrape.
    pub fn drops(&self) -> LogDrops {
        self.drops.clone()
    }

    fn write_line(&self, line: &[u8]) {
        let written = match &self.file {
            Some(file) => file.handle.lock().write_all(line),
            None => io::stdout().lock().write_all(line),
        };
        if written.is_err() {
            self.drops.add();
        }
    }
}

/// One log event's bytes, written as one line when the event is done.
pub struct LineWriter<'a> {
    sink: &'a LogSink,
    line: Vec<u8>,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.sink.write_line(&self.line);
        }
    }
}

impl<'a> MakeWriter<'a> for LogSink {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter { sink: self, line: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn general_with_file(path: Option<PathBuf>) -> General {
        General {
            pool_mode: crate::config::PoolMode::Session,
            cores: None,
            shutdown_drain: std::time::Duration::from_secs(1),
            log_level: "info".into(),
            log_file: path,
            log_format: LogFormat::Text,
            handover_socket: None,
            handover_wait: std::time::Duration::from_secs(60),
        }
    }

    #[test]
    fn a_failed_write_is_counted_not_raised() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sink = LogSink::open(&general_with_file(Some(dir.path().join("qp.log")))).expect("open");
        // A read-only handle: every write fails as a closed pipe or a full disk would.
        if let Some(file) = &sink.file {
            *file.handle.lock() = File::open(&file.path).expect("read-only reopen");
        }
        sink.make_writer().write_all(b"first\n").expect("the writer never reports failure");
        sink.make_writer().write_all(b"second\n").expect("the writer never reports failure");
        assert_eq!(sink.drops().count(), 2);
    }

    #[test]
    fn reopen_follows_the_path_after_a_rotation() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("qp.log");
        let sink = LogSink::open(&general_with_file(Some(path.clone()))).expect("open");
        sink.make_writer().write_all(b"before\n").expect("write");
        std::fs::rename(&path, dir.path().join("qp.log.1")).expect("rotate");
        sink.make_writer().write_all(b"still old\n").expect("write");
        sink.reopen().expect("reopen");
        let mut w = sink.make_writer();
        w.write_all(b"after").expect("write");
        w.write_all(b" rotation\n").expect("write");
        drop(w);
        assert_eq!(std::fs::read_to_string(dir.path().join("qp.log.1")).expect("old"), "before\nstill old\n");
        assert_eq!(std::fs::read_to_string(&path).expect("new"), "after rotation\n", "one event, one write");
        assert_eq!(sink.drops().count(), 0);
    }
}
