//! The single integration-test binary: one module per area, all sharing `support`
//! (real PostgreSQL and MariaDB servers, started once for the whole binary).

// clippy.toml's bans (thread::sleep, std Mutex) guard the router's cores; test threads are
// plain client threads, which may sleep and lock.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "../support/mod.rs"]
mod support;

mod abuse;
mod abuse_flow;
mod abuse_memory;
mod admin;
mod auth;
mod bridge_mysql_pg;
mod bridge_pg_mysql;
mod bridge_values;
mod causal;
mod causal_mysql;
mod causal_routes;
mod connectors;
mod console;
mod demo;
mod drain;
mod faults_fake;
mod faults_kill;
mod foundation;
mod frontdoor;
mod frontdoor_backend;
mod harness;
mod health;
mod htap;
mod htap_bridged;
mod htap_duckdb;
mod htap_json_pg;
mod htap_pg;
mod idle_transaction;
mod log_pipe;
mod mysql_commands;
mod mysql_fidelity;
mod mysql_infile;
mod mysql_kill;
mod mysql_probe;
mod mysql_routing;
mod mysql_safety;
mod mysql_session;
mod mysql_sha2;
mod mysql_sysbench;
mod mysql_types;
mod overload;
mod passthrough;
mod passthrough_identity;
mod passthrough_query;
mod pause;
mod pg_badinput;
mod pg_cancel;
mod pg_client_isolation;
mod pg_clients;
mod pg_copy_reject;
mod pg_extended;
mod pg_faults;
mod pg_isolation;
mod pg_pgbench;
mod pg_pipeline;
mod pg_prepared_ddl;
mod pg_prewarm;
mod pg_psql;
mod pg_raw;
mod pg_routing;
mod pg_session_mode;
mod pg_session_settings;
mod pg_stream;
mod pg_util;
mod pool_protocol;
mod raw_passthrough;
mod retry;
mod router;
mod routing_api;
mod routing_safety;
mod routing_safety_session;
mod routing_safety_sqlmode;
mod split_both;
mod systemd;
mod translation;
mod unknown_database;
