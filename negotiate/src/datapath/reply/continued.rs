//! A -07 reply too large for the requester's Receive and for its Reply chunk goes as
//! RDMA2_REPLY_MIDDLE parts and a final RDMA2_REPLY_INLINE (draft-ietf-nfsv4-rpcrdma-version-two-07
//! section 6.6.4: "If the combination of the provided Write chunk list and Reply chunk is not
//! adequate to convey a Reply, the Responder SHOULD use Message Continuation"). The framing is
//! section 4.1's (parts in XDR stream order, no other message's Payload stream between them:
//! the caller holds [`Transport::payload_stream`]), the headers 6.3.9's and 6.3.10's. Each part
//! after the first takes a credit of its own, waiting for the requester's RDMA2_GRANT when its
//! window is shut (4.2.1). DDP-eligible results still go by RDMA Write into their Write chunks,
//! posted before the first part and described by the final part's Write list.

use rpcrdma_v1::marshal_reply::{marshal_reply, ReplyError};
use rpcrdma_v2::draft07::continuation::{split, Part};
use rpcrdma_v2::draft07::marshal::{MessageType, MIDDLE_HEADER_LEN};

use std::time::Instant;

use super::*;

/// Whether a reply that could not be marshaled into one Send continues instead: it does not
/// fit the requester's Receive, and the Reply chunk is missing or too small (section 6.6.4).
/// A Write chunk too small for its result is still answered RDMA2_ERR_WRITE_RESOURCE (7.3.4).
pub(super) fn answers(e: &ReplyError) -> bool {
    matches!(e, ReplyError::NoReplyChunk { .. } | ReplyError::ReplyChunkTooSmall { .. })
}

/// Sends `reply` to `call` in parts, each within the requester's Receive
/// (`params.reply_inline_threshold`); returns once the last part's Send completed. `out` is
/// the caller's scratch. An `Err` after the first part leaves the sequence broken: the caller
/// closes the connection (RFC 8166 section 4.5.4's lost reply; nothing else may follow a
/// broken sequence's parts on the stream).
pub(super) fn send_reply<B: Backend>(
    conn: &Transport<B>,
    call: &Header<'_>,
    reply: &[u8],
    results: &[DdpItem],
    params: &ReplyParams,
    deadline: Instant,
    out: &mut MarshaledReply,
) -> Result<ReplySent, DataPathError> {
    let threshold = params.reply_inline_threshold;
    // Section 6.5: the handle the call's `rdma_inv_handle` named, when it named one.
    let invalidated = params.invalidate.filter(|_| params.remote_invalidation);
    // What is not a DDP-eligible result in a Write chunk goes inline, in the parts: no Reply
    // chunk, and no threshold for the payload as a whole.
    let req = ReplyRequest { credits: params.credits, reply_inline_threshold: usize::MAX, ddp_results: results };
    let provided = ProvidedChunks { writes: call.write_list(), reply: None };
    let mut header = vec![0u8; threshold];
    marshal_reply(reply, provided, &req, &mut header, out)?;
    // The final part's header: RDMA2_REPLY_INLINE with the Write list (its length does not
    // depend on the credit word).
    let final_header = draft07_header(out, 0, &mut header)?;
    // Each part carries at most `threshold` bytes of what goes inline (the DDP-eligible
    // results go by RDMA Write): a reply beyond the parts allowed is known before anything is
    // cut or copied.
    if out.inline_len() > conn.max_parts().saturating_mul(threshold) {
        return Err(ReplyError::NoReplyChunk { need: final_header + out.inline_len(), threshold }.into());
    }
    let mut payload = Vec::with_capacity(out.inline_len());
    for range in out.inline() {
        payload.extend_from_slice(&reply[range.clone()]);
    }
    let cut = threshold
        .checked_sub(MIDDLE_HEADER_LEN)
        .zip(threshold.checked_sub(final_header))
        .and_then(|(middle, last)| split(payload.len(), middle, last));
    // A Receive too small for even the final part's header, or more parts than this server
    // sends for one reply: it "cannot send [the] Reply using Message Continuation" (7.3.5).
    let Some(parts) = cut.filter(|parts| parts.len() <= conn.max_parts()) else {
        return Err(ReplyError::NoReplyChunk { need: final_header + payload.len(), threshold }.into());
    };
    let mut chain = ChainedWrites::new();
    let source = chain_writes(conn, ReplyBytes::Copied(reply), results, out, &mut chain)?;
    conn.post_writes_alone(&chain)?;
    let sent = send_parts(conn, out, &payload, &parts, params, invalidated, deadline);
    // The last Send completed after the Writes before it (or the connection is down).
    give_back_source(conn, source, sent.is_ok());
    sent?;
    Ok(ReplySent {
        form: ReplyForm::Inline,
        reduced_results: out.reduced_results(),
        invalidated,
        parts: parts.len(),
        lent_results: 0,
        lent_copies: 0,
    })
}

/// Posts each part in order and waits for its Send, each on a credit of its own (section
/// 4.2.1), all by `deadline`. Only the
/// final part is a Send With Invalidate (section 6.5: the requester's handle is done with
/// once the reply is whole).
fn send_parts<B: Backend>(
    conn: &Transport<B>,
    out: &MarshaledReply,
    payload: &[u8],
    parts: &[Part],
    params: &ReplyParams,
    invalidated: Option<u32>,
    deadline: Instant,
) -> Result<(), DataPathError> {
    let (xid, threshold) = (out.xid(), params.reply_inline_threshold);
    for (i, part) in parts.iter().enumerate() {
        // Each part takes its total once filled: the first on the credit the reply was given
        // when that was taken already, the later ones each on one of its own.
        let (credit, take) = (params.credits, (i > 0 || params.credit_owed).then_some(deadline));
        let bytes = &payload[part.bytes.clone()];
        let id = conn.wr_id();
        match part.remaining {
            Some(remaining) => conn.post_send_filled_draft07(id, None, threshold, credit, take, |buf, _| {
                Ok(marshal07::middle(buf, xid, credit, MessageType::Reply, remaining, bytes)?)
            })?,
            None => conn.post_send_filled_draft07(id, invalidated, threshold, credit, take, |buf, _| {
                let at = draft07_header(out, credit, buf)?;
                buf[at..at + bytes.len()].copy_from_slice(bytes);
                Ok(at + bytes.len())
            })?,
        }
        conn.wait(id)?;
    }
    Ok(())
}
