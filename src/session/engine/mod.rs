//! The session policy both wires share, sans-IO and protocol-neutral (#37): each wire fills
//! small fact structs from its own state (transaction status, exchange progress, pins) and asks
//! the engine what they mean, so a policy change is made once and tested once. Time is a
//! parameter; nothing here reads a clock, a socket, a pool or a protocol frame.

pub mod after;
pub mod digest;
pub mod effects;
pub mod hold;
pub mod prepared;
pub mod readonly;
pub mod release;
pub mod replica;
pub mod retry;
pub mod route;
pub mod ryw;
pub mod text;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_release;
#[cfg(test)]
mod tests_target;
