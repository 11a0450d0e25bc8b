//! The route tables of the two ports and their handlers. A route is a row (method, path,
//! handler); the routing endpoints (`/api/routing/test`, `/api/pattern-rules`,
//! `/api/translations`, `/api/stats/digests`) live in [`super::routing`]. Plugins answer under
//! their mount points.

use sha2::{Digest, Sha256};

use super::dto;
use super::http::{Request, Response};
use super::pause;
use super::plugin::{Mount, Plugins};
use super::routing;
use crate::control::{ControlError, ControlHandle};
use crate::error::{ErrorCode, Origin};
use crate::metrics::{self, CounterSnapshot, Format};

/// A handler: answers a request with what the control plane knows.
type Handler = fn(&Api, &Request) -> Response;

/// One row of a route table.
struct Route {
    method: &'static str,
    path: &'static str,
    handler: Handler,
}

/// The metrics port: read-only, never authenticated.
const METRICS_ROUTES: &[Route] = &[
    Route { method: "GET", path: "/metrics", handler: metrics_text },
    Route { method: "GET", path: "/health", handler: health },
];

/// The admin API port.
const API_ROUTES: &[Route] = &[
    Route { method: "GET", path: "/health", handler: health },
    Route { method: "GET", path: "/api/config", handler: config },
    Route { method: "GET", path: "/api/pools", handler: pools },
    Route { method: "POST", path: "/api/reload", handler: reload },
    Route { method: "POST", path: "/api/pause", handler: pause::pause },
    Route { method: "POST", path: "/api/resume", handler: pause::resume },
    Route { method: "POST", path: "/api/reconnect", handler: pause::reconnect },
    Route { method: "POST", path: "/api/kill", handler: pause::kill },
    Route { method: "POST", path: "/api/switchover", handler: pause::switchover },
    Route { method: "GET", path: "/api/routing/test", handler: routing::route_test },
    Route { method: "GET", path: "/api/pattern-rules", handler: routing::list_pattern_rules },
    Route { method: "POST", path: "/api/pattern-rules", handler: routing::add_pattern_rule },
    Route { method: "DELETE", path: "/api/pattern-rules", handler: routing::remove_pattern_rules },
    Route { method: "GET", path: "/api/translations", handler: routing::list_translations },
    Route { method: "POST", path: "/api/translations", handler: routing::add_translation },
    Route { method: "DELETE", path: "/api/translations", handler: routing::remove_translations },
    Route { method: "GET", path: "/api/stats/digests", handler: routing::digests },
    Route { method: "DELETE", path: "/api/stats/digests", handler: routing::reset_digests },
    Route { method: "GET", path: "/api/limits", handler: routing::limits },
];

/// Which port a request arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// `metrics.bind`.
    Metrics,
    /// The admin API (`metrics.bind` port + 1).
    Api,
}

/// What the handlers share: the control plane, the token, the plugins.
pub struct Api {
    control: ControlHandle,
    /// SHA-256 of the bearer token, when one is configured.
    token: Option<[u8; 32]>,
    plugins: Plugins,
}

impl Api {
    /// Handlers over `control`; with `token`, every API request must carry it.
    pub fn new(control: ControlHandle, token: Option<&str>, plugins: Plugins) -> Self {
        Self { control, token: token.map(digest), plugins }
    }

    /// Answers one request that arrived on `port`.
    pub fn handle(&self, port: Port, req: &Request) -> Response {
        let table = match port {
            Port::Metrics => METRICS_ROUTES,
            Port::Api => {
                if !self.authorized(req) {
                    return Response::error(401, "missing or wrong bearer token")
                        .with_header("WWW-Authenticate", "Bearer realm=\"querypilot\"".into());
                }
                if let Some(resp) = self.plugin(req) {
                    return resp;
                }
                API_ROUTES
            }
        };
        let mut methods = table.iter().filter(|r| r.path == req.path).peekable();
        if methods.peek().is_none() {
            return Response::error(404, &format!("no such endpoint: {}", req.path));
        }
        let allowed: Vec<&str> = methods.clone().map(|r| r.method).collect();
        match methods.find(|r| r.method == req.method) {
            Some(route) => (route.handler)(self, req),
            None => Response::error(405, &format!("{} does not accept {}", req.path, req.method))
                .with_header("Allow", allowed.join(", ")),
        }
    }

    /// The control plane the handlers talk to.
    pub(super) fn control(&self) -> &ControlHandle {
        &self.control
    }

    /// Constant-time check of the bearer token (digests compared, so neither the content nor
    /// the length of the configured token leaks through timing).
    fn authorized(&self, req: &Request) -> bool {
        let Some(expected) = &self.token else {
            return true;
        };
        let given = req.header("authorization").and_then(|h| h.strip_prefix("Bearer ")).unwrap_or_default();
        let got = digest(given.trim());
        got.iter().zip(expected.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }

    /// Requests under a plugin mount point: the plugin's answer, or 404 while none is registered.
    fn plugin(&self, req: &Request) -> Option<Response> {
        let mount = Mount::ALL.iter().find(|m| m.matches(&req.path))?;
        let rest = req.path.get(mount.path().len()..).unwrap_or_default();
        Some(match self.plugins.get(*mount) {
            Some(p) => p.handle(req, rest),
            None => Response::error(404, &format!("no {} plugin is registered with this router", mount.name())),
        })
    }
}

fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// A control-plane failure as a JSON error with its code and a fitting status.
pub(super) fn control_error(e: &ControlError) -> Response {
    let status = match (e, e.origin()) {
        (ControlError::Stopped, _) => 503,
        (ControlError::CoresSilent(_), _) => 504,
        (ControlError::NotFound(_), _) => 404,
        (_, Origin::Client) => 400,
        _ => 500,
    };
    Response::json(status, &dto::CodedError { error: e.to_string(), code: e.code() })
}

fn health(api: &Api, _: &Request) -> Response {
    if api.control.is_draining() {
        Response::json(503, &dto::Health { status: "draining" })
    } else {
        Response::json(200, &dto::Health { status: "serving" })
    }
}

fn metrics_text(api: &Api, req: &Request) -> Response {
    let format = Format::negotiate(req.header("accept"));
    match api.control.scrape().map(|s| metrics::render(s, format)) {
        Ok(Ok(text)) => Response::text(200, format.content_type(), text),
        Ok(Err(_)) => Response::error(500, "cannot render metrics"),
        Err(e) => control_error(&e),
    }
}

fn config(api: &Api, _: &Request) -> Response {
    match api.control.current() {
        Ok(snap) => {
            Response::json(200, &dto::ConfigView { version: snap.version.0, toml: snap.config.redacted_toml() })
        }
        Err(e) => control_error(&e),
    }
}

fn reload(api: &Api, _: &Request) -> Response {
    match api.control.reload() {
        Ok(v) => Response::json(200, &dto::Reloaded { version: v.0 }),
        Err(e) => control_error(&e),
    }
}

fn pools(api: &Api, _: &Request) -> Response {
    let (snap, reports) = match (api.control.current(), api.control.collect()) {
        (Ok(s), Ok(r)) => (s, r),
        (Err(e), _) | (_, Err(e)) => return control_error(&e),
    };
    let mut total = CounterSnapshot::default();
    for r in &reports {
        total.merge(&r.counters);
    }
    let pools = snap
        .config
        .pools
        .iter()
        .map(|p| {
            let figures = total.pool(&p.name);
            let backends = p
                .backends
                .iter()
                .map(|b| {
                    let address = format!("{}:{}", b.host, b.port);
                    let f = figures.and_then(|f| f.backends.iter().find(|x| x.label == address));
                    let health = f.and_then(|f| f.health.as_ref());
                    dto::BackendView {
                        idle: f.map_or(0, |f| f.idle),
                        active: f.map_or(0, |f| f.active),
                        connect_failures_total: f.map_or(0, |f| f.connect_failures_total),
                        // No figures yet (no core reported): nothing says it is unhealthy.
                        healthy: health.is_none_or(|h| h.healthy),
                        health_cause: health.map_or("none", |h| h.cause),
                        replica_lag_seconds: health.and_then(|h| h.lag_seconds()),
                        replica_lag_bytes: health.and_then(|h| h.lag_bytes),
                        health_check_failures_total: health.map_or(0, |h| h.check_failures()),
                        role_mismatch: health.and_then(|h| h.role_mismatch),
                        written_position: health.and_then(|h| h.written_position.clone()),
                        replayed_position: health.and_then(|h| h.replayed_position.clone()),
                        address,
                    }
                })
                .collect();
            dto::PoolView {
                name: p.name.clone(),
                mode: p.mode.as_str(),
                role: p.role.as_str(),
                max_connections: p.limits.max_connections.get(),
                waiting_clients: figures.map_or(0, |f| f.queue_depth),
                acquires_total: figures.map_or(0, |f| f.acquires_total),
                timeouts_total: figures.map_or(0, |f| f.timeouts_total),
                backends,
            }
        })
        .collect();
    Response::json(200, &dto::PoolsView { cores_reporting: reports.len(), pools })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::admin::plugin::Plugin;
    use crate::control::msg::{RulesVersion, Snapshot};
    use crate::control::{self, ControlSetup, Endpoints};

    /// A control handle whose control plane has no cores (it stops at once: requests fail with
    /// `Stopped`, the drain flag still works).
    fn control() -> ControlHandle {
        let text = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\nusername = \"u\"\npassword = \"p\"\nbackends = [{ host = \"127.0.0.1\", port = 5432 }]\n\n[routing]\ndefault_pool = \"main\"\n";
        let config = crate::config::Config::parse(text, "t.toml").expect("config");
        let (_, events) = crossbeam_channel::unbounded();
        let setup = ControlSetup {
            config_path: None,
            initial: Arc::new(Snapshot::build(RulesVersion(1), Arc::new(config), &[], &[]).expect("rules")),
            cores: Vec::new(),
            events,
            drain_window: std::time::Duration::from_millis(10),
            endpoints: Endpoints::default(),
            describe: |_, _| Vec::new(),
            settle_mysql: |_, _, _| crate::control::Settled::AsRouted,
            log_drops: Default::default(),
        };
        let (handle, join) = control::start(setup).expect("control");
        let _ = join.join();
        handle
    }

    fn get(path: &str, auth: Option<&str>) -> Request {
        let headers = auth.map(|a| vec![("authorization".to_owned(), a.to_owned())]).unwrap_or_default();
        Request { method: "GET".into(), path: path.into(), query: None, headers, body: Vec::new() }
    }

    fn error_of(resp: &Response) -> String {
        let v: serde_json::Value = serde_json::from_slice(&resp.body).expect("json body");
        v["error"].as_str().expect("error field").to_owned()
    }

    struct Echo;
    impl Plugin for Echo {
        fn mount(&self) -> Mount {
            Mount::Guard
        }
        fn handle(&self, _: &Request, rest: &str) -> Response {
            Response::json(200, &serde_json::json!({ "rest": rest }))
        }
    }

    #[test]
    fn token_is_required_on_every_api_request_but_not_on_the_metrics_port() {
        let api = Api::new(control(), Some("s3cret"), Plugins::default());
        for auth in [None, Some("Bearer wrong"), Some("Basic s3cret"), Some("Bearer s3cret2"), Some("Bearer ")] {
            let resp = api.handle(Port::Api, &get("/health", auth));
            assert_eq!(resp.status, 401, "{auth:?}");
            assert!(error_of(&resp).contains("bearer token"));
        }
        assert_eq!(api.handle(Port::Api, &get("/health", Some("Bearer s3cret"))).status, 200);
        assert_eq!(api.handle(Port::Metrics, &get("/health", None)).status, 200);
        let open = Api::new(control(), None, Plugins::default());
        assert_eq!(open.handle(Port::Api, &get("/health", None)).status, 200);
    }

    #[test]
    fn unknown_paths_404_wrong_methods_405_and_ports_keep_their_tables() {
        let api = Api::new(control(), None, Plugins::default());
        let resp = api.handle(Port::Api, &get("/api/routing/tests", None));
        assert_eq!(resp.status, 404);
        assert!(error_of(&resp).contains("/api/routing/tests"));
        assert_eq!(api.handle(Port::Api, &get("/metrics", None)).status, 404, "metrics live on their own port");
        assert_eq!(api.handle(Port::Metrics, &get("/api/config", None)).status, 404);
        let resp = api.handle(Port::Api, &get("/api/reload", None));
        assert_eq!(resp.status, 405);
        assert!(resp.headers.contains(&("Allow", "POST".to_owned())));
    }

    #[test]
    fn plugin_mount_points_answer_404_until_a_plugin_registers() {
        let api = Api::new(control(), None, Plugins::default());
        for path in ["/api/v1/plugins/accelerator", "/api/v1/plugins/guard/rules"] {
            let resp = api.handle(Port::Api, &get(path, None));
            assert_eq!(resp.status, 404);
            assert!(error_of(&resp).contains("plugin is registered"), "{}", error_of(&resp));
        }
        let mut plugins = Plugins::default();
        assert!(plugins.register(Arc::new(Echo)).is_ok());
        assert!(plugins.register(Arc::new(Echo)).is_err(), "one plugin per mount point");
        let api = Api::new(control(), None, plugins);
        let resp = api.handle(Port::Api, &get("/api/v1/plugins/guard/rules", None));
        assert_eq!((resp.status, resp.body.as_slice()), (200, br#"{"rest":"/rules"}"#.as_slice()));
        assert_eq!(api.handle(Port::Api, &get("/api/v1/plugins/guardian", None)).status, 404);
        assert!(error_of(&api.handle(Port::Api, &get("/api/v1/plugins/accelerator", None))).contains("accelerator"));
    }

    #[test]
    fn health_turns_503_on_drain_and_control_failures_are_json() {
        let control = control();
        let api = Api::new(control.clone(), None, Plugins::default());
        let resp = api.handle(Port::Metrics, &get("/metrics", None));
        assert_eq!(resp.status, 503, "the control plane is gone");
        assert!(error_of(&resp).contains("stopped"));
        control.drain();
        assert_eq!(api.handle(Port::Api, &get("/health", None)).status, 503);
        assert_eq!(api.handle(Port::Metrics, &get("/health", None)).status, 503);
    }
}
