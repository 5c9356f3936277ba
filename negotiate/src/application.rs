//! The one way this crate runs the application's code on a peer's bytes: a server's handler
//! and binding, an extension's handler, a client's backward-call handler. That code runs on
//! the thread that received the message (a server's event loop, a client's dispatcher or
//! worker), so its panic must end the one message it was handling, never that thread: each
//! caller answers the message as failed (an RPC SYSTEM_ERR reply, RFC 5531 section 9; an
//! unsupported option or header type) and the connection serves on.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `code`, the application's: `None` when it panicked.
///
/// Unwind safety is asserted: each caller gives the code the one message it handles and
/// drops what the code made of it with the failure, and answers the message from what it
/// held before the code ran.
pub(crate) fn run<T>(code: impl FnOnce() -> T) -> Option<T> {
    catch_unwind(AssertUnwindSafe(code)).ok()
}
