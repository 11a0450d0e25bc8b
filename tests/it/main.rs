//! The single integration-test binary: one module per area, all sharing `support`
//! (real PostgreSQL and MariaDB servers, started once for the whole binary).

#[path = "../support/mod.rs"]
mod support;

mod harness;
mod foundation;
mod router;
mod admin;
mod routing_api;
mod mysql_session;
mod mysql_sysbench;
mod mysql_types;
mod bridge_mysql_pg;
