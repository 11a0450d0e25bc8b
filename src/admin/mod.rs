//! The admin HTTP server: `/metrics` (and `/health`) on `metrics.bind`, the REST API on the same
//! IP at the next port, each on its own plain thread (never a data core).
//!
//! One request per connection, handled in turn with strict size caps and deadlines ([`http`]), so
//! a slow or hostile client costs at most one deadline and never memory. Talks only to the control
//! plane through a [`ControlHandle`]; must not use `rt`, `core`, `session` or `pool`.
//!
//! Security: the API binds to loopback by default. When a token is configured every API request
//! must carry `Authorization: Bearer <token>`; off loopback a token is mandatory and the server
//! refuses to start without one. The metrics port is read-only and unauthenticated.

pub mod console;
pub mod dto;
pub mod http;
mod pause;
pub mod plugin;
pub mod route;
mod routing;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::Metrics;
use crate::control::ControlHandle;
use crate::error::{ErrorCode, Origin};
use http::{Limits, Response};
pub use plugin::{Mount, Plugin, Plugins};
use route::{Api, Port};

/// How long a client has to send its whole request.
const READ_DEADLINE: Duration = Duration::from_secs(5);
/// How long writing a response may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the admin server could not start.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// A port could not be bound.
    #[error("cannot bind the admin server to {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The API would listen off loopback without a token.
    #[error("the admin API on {0} is not on loopback: set metrics.admin_token")]
    TokenRequired(SocketAddr),
    /// A server thread could not be spawned.
    #[error("cannot start the admin thread: {0}")]
    Thread(std::io::Error),
}

impl ErrorCode for AdminError {
    fn code(&self) -> &'static str {
        match self {
            Self::Bind { .. } => "admin.bind",
            Self::TokenRequired(_) => "admin.token_required",
            Self::Thread(_) => "admin.thread",
        }
    }
    fn origin(&self) -> Origin {
        match self {
            Self::TokenRequired(_) => Origin::Client,
            _ => Origin::Internal,
        }
    }
}

/// The two sockets, bound before the cores start so a taken port fails the start cleanly.
pub struct Bound {
    metrics: TcpListener,
    api: TcpListener,
    token: Option<String>,
}

impl Bound {
    /// `(metrics, api)` addresses actually bound (ports resolved when configured as 0).
    pub fn addrs(&self) -> Result<(SocketAddr, SocketAddr), AdminError> {
        let local = |l: &TcpListener| {
            l.local_addr().map_err(|source| AdminError::Bind { addr: SocketAddr::from(([0, 0, 0, 0], 0)), source })
        };
        Ok((local(&self.metrics)?, local(&self.api)?))
    }
}

fn bind_one(addr: SocketAddr) -> Result<TcpListener, AdminError> {
    TcpListener::bind(addr).map_err(|source| AdminError::Bind { addr, source })
}

/// Binds both ports when `[metrics] enabled`; `None` when disabled. With `inherited` (the
/// `/metrics` and API sockets a former process handed over, #40) those are served instead.
pub fn bind(config: &Metrics, inherited: Option<[OwnedFd; 2]>) -> Result<Option<Bound>, AdminError> {
    if !config.enabled {
        return Ok(None);
    }
    let api_addr = config.admin_bind();
    if !api_addr.ip().to_canonical().is_loopback() && config.admin_token.is_none() {
        return Err(AdminError::TokenRequired(api_addr));
    }
    let (metrics, api) = match inherited {
        Some([metrics, api]) => (TcpListener::from(metrics), TcpListener::from(api)),
        None => (bind_one(config.bind)?, bind_one(api_addr)?),
    };
    Ok(Some(Bound { metrics, api, token: config.admin_token.clone() }))
}

/// The running server; stopping (or dropping) it closes both ports and joins the threads.
pub struct AdminHandle {
    stop: Arc<AtomicBool>,
    addrs: Vec<SocketAddr>,
    threads: Vec<JoinHandle<()>>,
    /// Duplicates of the two sockets (`/metrics`, API), for [`AdminHandle::hand_over`].
    sockets: Vec<OwnedFd>,
}

impl AdminHandle {
    /// Stops serving and waits for the threads.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// #40: stops serving and returns the `/metrics` and API sockets, still listening, for a
    /// new binary: connections arriving meanwhile wait in their backlogs instead of being
    /// refused.
    pub fn hand_over(mut self) -> Vec<OwnedFd> {
        self.shutdown();
        std::mem::take(&mut self.sockets)
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        for addr in std::mem::take(&mut self.addrs) {
            // Wake the blocking accept; it sees the flag and returns.
            let _ = TcpStream::connect_timeout(&wake_addr(addr), Duration::from_millis(500));
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for AdminHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A connectable address for a listener bound to `addr` (the unspecified address is not).
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port()),
        _ => addr,
    }
}

/// Starts serving both ports on their own threads.
pub fn serve(bound: Bound, control: ControlHandle, plugins: Plugins) -> Result<AdminHandle, AdminError> {
    let (metrics_addr, api_addr) = bound.addrs()?;
    let api = Arc::new(Api::new(control, bound.token.as_deref(), plugins));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handle = AdminHandle { stop: stop.clone(), addrs: Vec::new(), threads: Vec::new(), sockets: Vec::new() };
    for (name, listener, port, addr) in
        [("qp-metrics", bound.metrics, Port::Metrics, metrics_addr), ("qp-admin", bound.api, Port::Api, api_addr)]
    {
        handle.sockets.push(listener.try_clone().map_err(|source| AdminError::Bind { addr, source })?.into());
        let (api, stop) = (api.clone(), stop.clone());
        let t = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || accept_loop(&listener, &api, port, &stop))
            .map_err(AdminError::Thread)?; // dropping `handle` stops what already started
        handle.addrs.push(addr);
        handle.threads.push(t);
    }
    tracing::info!(metrics = %metrics_addr, api = %api_addr, "admin server listening");
    Ok(handle)
}

fn accept_loop(listener: &TcpListener, api: &Api, port: Port, stop: &AtomicBool) {
    let limits = Limits::default();
    for stream in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        match stream {
            Ok(s) => serve_connection(s, api, port, &limits),
            Err(e) => {
                // EMFILE and friends: back off instead of spinning on a failing accept.
                tracing::warn!(error = %e, "admin accept failed");
                // The admin thread's own blocking loop, not a core or the control plane.
                #[allow(clippy::disallowed_methods)]
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn serve_connection(mut stream: TcpStream, api: &Api, port: Port, limits: &Limits) {
    let resp = match http::read_request(&mut stream, limits, Instant::now() + READ_DEADLINE) {
        Ok(req) => api.handle(port, &req),
        Err(e) => Response::error(e.status(), &e.to_string()),
    };
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    if let Err(e) = resp.write_to(&mut stream) {
        tracing::debug!(error = %e, "admin response not delivered");
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(bind: &str, token: Option<&str>) -> Metrics {
        Metrics { enabled: true, bind: bind.parse().expect("addr"), admin_token: token.map(str::to_owned) }
    }

    #[test]
    fn refuses_a_non_loopback_api_without_a_token() {
        for bind in ["0.0.0.0:0", "[::]:0"] {
            let err = bind_and_stop(&metrics(bind, None)).expect_err("must refuse");
            assert!(matches!(err, AdminError::TokenRequired(_)), "{err}");
            assert_eq!(err.code(), "admin.token_required");
        }
        bind_and_stop(&metrics("0.0.0.0:0", Some("t"))).expect("a token makes it acceptable");
        bind_and_stop(&metrics("127.0.0.1:0", None)).expect("loopback needs no token");
        let off = Metrics { enabled: false, ..metrics("0.0.0.0:0", None) };
        assert!(bind(&off, None).expect("disabled").is_none());
    }

    fn bind_and_stop(config: &Metrics) -> Result<(), AdminError> {
        let bound = bind(config, None)?.expect("enabled");
        let (m, a) = bound.addrs()?;
        assert_eq!(m.ip(), a.ip(), "the API shares the metrics IP");
        Ok(())
    }

    #[test]
    fn wake_address_is_connectable() {
        assert_eq!(wake_addr("0.0.0.0:9".parse().expect("a")), "127.0.0.1:9".parse().expect("a"));
        assert_eq!(wake_addr("[::]:9".parse().expect("a")), "[::1]:9".parse().expect("a"));
        assert_eq!(wake_addr("10.1.2.3:9".parse().expect("a")), "10.1.2.3:9".parse().expect("a"));
    }
}
