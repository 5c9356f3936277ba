//! How this crate runs code that calls the application's on a peer's bytes: a server's
//! handler and binding (with the steps around the binding, fetching the call and sending the
//! reply, which are the crate's own), an extension's handler, a client's backward-call
//! handler. (An async handler's future is polled under its own catch, which hands the panic
//! on to whoever awaits it: `server::async_handler`.) That code runs on
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
