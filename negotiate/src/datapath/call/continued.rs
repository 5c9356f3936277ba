//! A -07 call too large for the responder's Receive goes as RDMA2_CALL_MIDDLE parts and a
//! final RDMA2_CALL_INLINE (draft-ietf-nfsv4-rpcrdma-version-two-07 section 4.1, figure 4 of
//! 6.6.2.2; headers 6.3.6 and 6.3.7), when the requester allows that many Sends, the message
//! is within what a responder holds of one by default ([`MAX_CONTINUED_CALL`]), and the
//! responder's window has room for them all now: the whole message inline, no Read chunk,
//! its Write list and Reply chunk in the final part's header. Each part takes a running total
//! of its own (4.2.1) and the parts are posted back to back, so that no other message's
//! Payload stream comes between them (4.1) and no part waits for credit with the parts of
//! other calls queued behind it. Otherwise the call goes the usual way (a Call chunk,
//! RDMA2_CALL_EXTERNAL), which needs one Send only.

use rpcrdma_v1::ulb::DdpItem;
use rpcrdma_v2::draft07::continuation::split;
use rpcrdma_v2::draft07::marshal::{self as marshal07, MessageType, MIDDLE_HEADER_LEN};

use super::*;
use crate::requester::MAX_CONTINUED_CALL;

/// Sends `call` in parts when it should and can continue: `Ok(None)`, with nothing sent (and
/// whatever it registered released again), when it goes the usual way instead (see the
/// [module documentation](self)).
pub(super) fn send_call<B: Backend>(
    conn: &Transport<B>,
    call: &[u8],
    desc: &CallDescription,
    out: &mut MarshaledCall,
    params: &CallParams,
    max_parts: usize,
    more_sends: impl FnOnce(u32) -> Option<u32>,
) -> Result<Option<PendingCall<B>>, DataPathError> {
    let threshold = params.thresholds.call;
    let Some(middle_room) = threshold.checked_sub(MIDDLE_HEADER_LEN).filter(|&room| room >= 4) else {
        return Ok(None);
    };
    // A call that fits one Send, its DDP-eligible arguments reduced, goes so (its arguments
    // are placed by RDMA Read, as their binding asks); and one needing more parts than
    // allowed goes in a Call chunk: both known before anything is registered.
    let reduced = desc.args.iter().map(DdpItem::padded_len).sum::<usize>();
    let Some(inline) = call.len().checked_sub(reduced) else { return Ok(None) };
    if fits_one_draft07_send(inline, threshold)
        || call.len() > MAX_CONTINUED_CALL
        || call.len().div_ceil(middle_room) > max_parts
    {
        return Ok(None);
    }
    // The final part's header, marshaled as for a call with no inline threshold: the whole
    // message inline, the Write list and Reply chunk the binding asks for.
    let mut reg = WindowRegistrar::new(conn, call);
    let mut header = vec![0u8; threshold];
    let marshaled = marshal_header(&mut reg, desc, out, params, usize::MAX, &mut header);
    let (memory, finished) = reg.finish_parts();
    let pending = PendingCall { xid: out.xid(), form: out.form(), parts: 1, memory, offered: None };
    let give_up = |pending: PendingCall<B>| {
        let _ = pending.finish(conn, None, None);
        Ok(None)
    };
    // (A failure here, its header too long for a Receive say, is met again the usual way,
    // with the error that way's form gives.)
    let (Ok(final_len), Ok(())) = (marshaled, finished) else { return give_up(pending) };
    debug_assert_eq!(out.inline_len(), call.len(), "no inline threshold: nothing reduced");
    let parts = threshold
        .checked_sub(final_len)
        .and_then(|last| split(call.len(), middle_room, last))
        .filter(|parts| (2..=max_parts).contains(&parts.len()));
    let Some(parts) = parts else { return give_up(pending) };
    // Each part filled before any total is taken: a total taken is a Send counted.
    let mut filled = Vec::with_capacity(parts.len());
    for part in &parts {
        let bytes = &call[part.bytes.clone()];
        let fill = conn.fill_send(threshold, |buf, _| match part.remaining {
            // (The credit word is stamped as each part is posted.)
            Some(remaining) => Ok(marshal07::middle(buf, out.xid(), 0, MessageType::Call, remaining, bytes)?),
            None => {
                buf[..final_len].copy_from_slice(&header[..final_len]);
                buf[final_len..final_len + bytes.len()].copy_from_slice(bytes);
                Ok(final_len + bytes.len())
            }
        });
        match fill {
            Ok(f) => filled.push(f),
            Err(e) => {
                filled.into_iter().for_each(|f| conn.discard_filled(f));
                let _ = pending.finish(conn, None, None);
                return Err(e);
            }
        }
    }
    let more = u32::try_from(parts.len() - 1).expect("at most max_parts");
    let Some(total) = more_sends(more) else {
        filled.into_iter().for_each(|f| conn.discard_filled(f));
        return give_up(pending);
    };
    let totals = std::iter::once(params.credits).chain(std::iter::repeat_n(total, parts.len() - 1));
    match conn.post_parts_draft07(filled, totals) {
        Ok(()) => Ok(Some(PendingCall { parts: parts.len(), ..pending })),
        Err(e) => {
            // Some parts may be out, the rest never will be, and every one was counted: the
            // responder waits for the rest of a sequence nothing may interrupt (6.3.6), and
            // this side's count is ahead of its Sends. The connection cannot go on; the call
            // goes out again on the next one (RFC 8166 section 4.5.4).
            conn.close(format!("a continued call's parts could not all be posted: {e}"));
            let _ = pending.finish(conn, None, None);
            Err(e)
        }
    }
}
