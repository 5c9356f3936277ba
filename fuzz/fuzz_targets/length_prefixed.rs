//! The message sequences the -07 targets read: the input cut into messages, each a 2-byte
//! big-endian length and then that many bytes (the last one cut short by the input's end).
//! Included with `#[path]` by the targets that need it; not a target itself.

/// The messages of `data`, in order.
pub fn messages(mut data: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        if data.len() < 2 {
            return None;
        }
        let len = usize::from(u16::from_be_bytes([data[0], data[1]]));
        let end = (2 + len).min(data.len());
        let message = &data[2..end];
        data = &data[end..];
        Some(message)
    })
}
