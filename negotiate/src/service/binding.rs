//! [`Bindings`]: generated Upper-Layer Bindings as the transport's [`UpperLayerBinding`].

use rpcrdma_v1::ulb::{DdpItem, UpperLayerBinding};
use xdr_spec_rt::rpc::{Binding, Item};

use crate::onc::{CallHeader, ReplyHeader};

/// The Upper-Layer Bindings (RFC 8166 section 6) of the programs a client calls or a server
/// serves, each version's a [`Binding`] (a generated `Binding`, from a binding file beside
/// the specification), as one [`UpperLayerBinding`] for [`Client`](crate::client::Client)
/// calls and [`Server::start`](crate::server::Server::start). It reads each message's RPC
/// header with [`onc`](crate::onc) to find the program, version and procedure, and hands
/// the arguments and results to that version's binding; offsets come back counted from the
/// start of the RPC message. A call to a program version with no binding here has nothing
/// DDP-eligible and replies of at most [`Bindings::DEFAULT_REPLY`] bytes.
///
/// ```
/// use negotiate::service::Bindings;
/// use rpcrdma_v1::ulb::UpperLayerBinding;
/// let none = Bindings::new();
/// assert_eq!(none.max_reply_size(&[0; 40]), Bindings::DEFAULT_REPLY);
/// ```
#[derive(Default)]
pub struct Bindings {
    bindings: Vec<Box<dyn Binding>>,
}

impl Bindings {
    /// Where no binding says otherwise, a reply fits the smallest inline threshold (RFC 8166
    /// section 3.3.2).
    pub const DEFAULT_REPLY: usize = cm_private_data::MIN_INLINE as usize;

    /// No binding yet.
    pub fn new() -> Self {
        Bindings::default()
    }

    /// These bindings and `binding` too; a second for the same program and version replaces
    /// the first.
    #[must_use]
    pub fn with(mut self, binding: impl Binding + 'static) -> Self {
        self.bindings.retain(|b| (b.program(), b.version()) != (binding.program(), binding.version()));
        self.bindings.push(Box::new(binding));
        self
    }

    /// The binding of `call`'s program and version, its procedure, and where its arguments
    /// start.
    fn of(&self, call: &[u8]) -> Option<(&dyn Binding, u32, usize)> {
        let (h, at) = CallHeader::decode(call).ok()?;
        let b = self.bindings.iter().find(|b| (b.program(), b.version()) == (h.prog, h.vers))?;
        Some((&**b, h.proc, at))
    }
}

/// `items`, counted from `base` on instead of from the start of what the binding read.
fn shifted(items: &[Item], base: usize, out: &mut Vec<DdpItem>) {
    out.extend(items.iter().map(|i| DdpItem::new(base + i.offset, i.len)));
}

impl UpperLayerBinding for Bindings {
    fn call_ddp_items(&self, call: &[u8], out: &mut Vec<DdpItem>) {
        let Some((b, procedure, at)) = self.of(call) else { return };
        let mut items = Vec::new();
        b.argument_items(procedure, &call[at..], &mut items);
        // In stream order, whatever order the binding file listed them in (RFC 8166 3.4.5).
        items.sort_by_key(|i| i.offset);
        shifted(&items, at, out);
    }

    fn reply_ddp_maxima(&self, call: &[u8], out: &mut Vec<usize>) {
        if let Some((b, procedure, at)) = self.of(call) {
            b.result_maxima(procedure, &call[at..], out);
        }
    }

    fn max_reply_size(&self, call: &[u8]) -> usize {
        self.of(call).map_or(Self::DEFAULT_REPLY, |(b, procedure, at)| b.max_reply(procedure, &call[at..]))
    }

    fn reply_ddp_items(&self, call: &[u8], reply: &[u8], reduced: usize, out: &mut Vec<DdpItem>) {
        let Some((b, procedure, args_at)) = self.of(call) else { return };
        // Results follow an accepted SUCCESS reply's header; any other reply carries none.
        let Ok((h, at)) = ReplyHeader::decode(reply) else { return };
        if !h.reply.is_success() {
            return;
        }
        let mut items = Vec::new();
        b.result_items(procedure, &call[args_at..], &reply[at..], reduced, &mut items);
        shifted(&items, at, out);
    }
}
