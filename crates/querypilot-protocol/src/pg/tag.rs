//! The message-type bytes of protocol 3.0 by name (PostgreSQL docs, §55.7 "Message Formats"), the
//! error and notice field codes (§55.8) and the transaction status of ReadyForQuery, so code that
//! looks at raw frames says which message it means. A byte can mean different messages in the two
//! directions (`S` is Sync from a client and ParameterStatus from a server), hence the modules.

/// Messages a server sends.
pub mod backend {
    /// ParseComplete.
    pub const PARSE_COMPLETE: u8 = b'1';
    /// BindComplete.
    pub const BIND_COMPLETE: u8 = b'2';
    /// CloseComplete.
    pub const CLOSE_COMPLETE: u8 = b'3';
    /// NotificationResponse (LISTEN/NOTIFY).
    pub const NOTIFICATION_RESPONSE: u8 = b'A';
    /// CommandComplete.
    pub const COMMAND_COMPLETE: u8 = b'C';
    /// DataRow.
    pub const DATA_ROW: u8 = b'D';
    /// ErrorResponse.
    pub const ERROR_RESPONSE: u8 = b'E';
    /// CopyInResponse.
    pub const COPY_IN_RESPONSE: u8 = b'G';
    /// CopyOutResponse.
    pub const COPY_OUT_RESPONSE: u8 = b'H';
    /// CopyData (either direction).
    pub const COPY_DATA: u8 = b'd';
    /// CopyDone (either direction).
    pub const COPY_DONE: u8 = b'c';
    /// EmptyQueryResponse.
    pub const EMPTY_QUERY_RESPONSE: u8 = b'I';
    /// NoticeResponse.
    pub const NOTICE_RESPONSE: u8 = b'N';
    /// ParameterStatus.
    pub const PARAMETER_STATUS: u8 = b'S';
    /// RowDescription.
    pub const ROW_DESCRIPTION: u8 = b'T';
    /// ReadyForQuery.
    pub const READY_FOR_QUERY: u8 = b'Z';
    /// NoData.
    pub const NO_DATA: u8 = b'n';
    /// PortalSuspended.
    pub const PORTAL_SUSPENDED: u8 = b's';
    /// ParameterDescription.
    pub const PARAMETER_DESCRIPTION: u8 = b't';
}

/// Messages a client sends.
pub mod frontend {
    /// Bind.
    pub const BIND: u8 = b'B';
    /// Flush.
    pub const FLUSH: u8 = b'H';
    /// FunctionCall.
    pub const FUNCTION_CALL: u8 = b'F';
    /// Parse.
    pub const PARSE: u8 = b'P';
    /// Query (simple protocol).
    pub const QUERY: u8 = b'Q';
    /// Sync.
    pub const SYNC: u8 = b'S';
    /// Terminate.
    pub const TERMINATE: u8 = b'X';
    /// CopyDone.
    pub const COPY_DONE: u8 = b'c';
    /// CopyData (both directions).
    pub const COPY_DATA: u8 = b'd';
    /// CopyFail.
    pub const COPY_FAIL: u8 = b'f';
    /// PasswordMessage, SASLInitialResponse and SASLResponse.
    pub const PASSWORD: u8 = b'p';
}

/// Field codes of ErrorResponse and NoticeResponse.
pub mod field {
    /// Severity, possibly localized.
    pub const SEVERITY: u8 = b'S';
    /// Severity, never localized (servers since 9.6).
    pub const SEVERITY_NONLOCALIZED: u8 = b'V';
    /// SQLSTATE code.
    pub const CODE: u8 = b'C';
    /// Primary message.
    pub const MESSAGE: u8 = b'M';
}

/// Transaction status byte of ReadyForQuery.
pub mod tx_status {
    /// Idle: not in a transaction block.
    pub const IDLE: u8 = b'I';
    /// In a transaction block.
    pub const IN_BLOCK: u8 = b'T';
    /// In a failed transaction block.
    pub const FAILED: u8 = b'E';
}
