//! Configuration: raw serde structs, validation, typed `Config`.
