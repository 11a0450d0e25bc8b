//! PostgreSQL frontend/backend protocol version 3.0 (PostgreSQL docs, chapter 55 "Frontend/Backend
//! Protocol"): framing, startup, the messages of both directions and authentication math.
