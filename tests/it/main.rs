//! The single integration-test binary: one module per area, all sharing `support`
//! (real PostgreSQL and MariaDB servers, started once for the whole binary).

#[path = "../support/mod.rs"]
mod support;

mod harness;
mod abuse;
mod foundation;
mod router;
mod admin;
mod bridge_mysql_pg;
mod bridge_pg_mysql;
mod health;
mod mysql_routing;
mod routing_api;
mod mysql_session;
mod mysql_sysbench;
mod mysql_types;
mod pg_badinput;
mod pg_cancel;
mod pg_clients;
mod pg_extended;
mod pg_faults;
mod pg_isolation;
mod pg_pgbench;
mod pg_prewarm;
mod pg_psql;
mod pg_raw;
mod pg_routing;
mod pg_util;
mod retry;
