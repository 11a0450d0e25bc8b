//! systemd's readiness protocol (`Type=notify`, sd_notify(3)): tells the service manager when the
//! router is ready (every listener bound), reloading (SIGHUP) and stopping (drain). Without
//! `NOTIFY_SOCKET` in the environment every call is a no-op, so the same binary runs under any
//! supervisor. A failed send is ignored: readiness is advice to the manager, never a reason to
//! stop serving.

use std::os::unix::net::UnixDatagram;

/// Where the service manager listens, read once at start.
#[derive(Debug, Clone)]
pub struct Notifier {
    socket: Option<std::os::unix::net::SocketAddr>,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` (a path, or `@name` for an abstract socket).
    pub fn from_env() -> Self {
        let socket = std::env::var_os("NOTIFY_SOCKET").and_then(|v| address(&v.to_string_lossy()));
        Self { socket }
    }

    /// Every listener is bound and the router serves.
    pub fn ready(&self) {
        self.send(&format!("READY=1\nMAINPID={}\nSTATUS=serving", std::process::id()));
    }

    /// A configuration reload starts; [`Notifier::ready`] follows once it is over.
    pub fn reloading(&self) {
        // Type=notify (not notify-reload), so no MONOTONIC_USEC is needed: systemd 252 (Debian 12)
        // predates the reload handshake that wants it.
        self.send("RELOADING=1\nSTATUS=reloading");
    }

    /// The router drains and will exit.
    pub fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=draining");
    }

    fn send(&self, state: &str) {
        let Some(addr) = &self.socket else { return };
        if let Ok(sock) = UnixDatagram::unbound() {
            let _ = sock.send_to_addr(state.as_bytes(), addr);
        }
    }
}

fn address(value: &str) -> Option<std::os::unix::net::SocketAddr> {
    if let Some(name) = value.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        return std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).ok();
    }
    if value.starts_with('/') {
        return std::os::unix::net::SocketAddr::from_pathname(value).ok();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_reach_the_socket_named_by_the_environment_value() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify.sock");
        let manager = UnixDatagram::bind(&path).expect("bind");
        let n = Notifier { socket: address(&path.display().to_string()) };
        n.ready();
        n.reloading();
        n.stopping();
        let mut buf = [0u8; 256];
        let mut got = Vec::new();
        for _ in 0..3 {
            let len = manager.recv(&mut buf).expect("recv");
            got.push(String::from_utf8_lossy(&buf[..len]).into_owned());
        }
        assert!(got[0].starts_with("READY=1\nMAINPID="), "{got:?}");
        assert!(got[1].starts_with("RELOADING=1\n"), "{got:?}");
        assert!(got[2].starts_with("STOPPING=1"), "{got:?}");
    }

    #[test]
    fn no_or_unusable_socket_is_a_no_op() {
        assert!(address("relative/path").is_none());
        assert!(address("@qp-abstract").is_some());
        Notifier { socket: None }.ready();
    }
}
