//! ONC RPC programs as types (RFC 5531 section 12): what `xdr-spec` generates from a
//! `program` block when services are asked for, and what a transport implements to carry
//! them.
//!
//! - Each procedure of each version is a type implementing [`Procedure`]: its program,
//!   version and procedure numbers, and the XDR types of its arguments and results.
//! - A client calls a procedure through a [`Caller`] (a transport: `negotiate` implements it
//!   over RPC-over-RDMA) and gets its [`Results`], decoded in place from the reply message.
//! - A server implements the generated `Service` trait of a version, one method per
//!   procedure, each answering through its [`Reply`]; the generated `Server` wrapper is a
//!   [`Program`], which decodes the arguments, runs the method and encodes its results
//!   straight into the reply message. Which program, version and procedure a call names, and
//!   the RFC 5531 answers to one that names none served, are the transport's.
//!
//! A synchronous call allocates nothing here but the reply message's growth; an async
//! server's call owns its arguments and answer, and its future is boxed.
//!
//! ```
//! use xdr_spec_rt::rpc::{Dispatched, Procedure, Program, Reply, Replied, Void};
//! use xdr_spec_rt::Xdr;
//!
//! // What the generator writes for `unsigned int DOUBLE(unsigned int) = 1;` in version 1 of
//! // program 0x20000001, and a server of it, by hand:
//! struct Double;
//! impl Procedure for Double {
//!     const PROGRAM: u32 = 0x2000_0001;
//!     const VERSION: u32 = 1;
//!     const PROCEDURE: u32 = 1;
//!     const NAME: &'static str = "DOUBLE";
//!     type Args<'a> = u32;
//!     type Results<'a> = u32;
//! }
//! struct Server;
//! impl Program for Server {
//!     fn program(&self) -> u32 { 0x2000_0001 }
//!     fn version(&self) -> u32 { 1 }
//!     fn dispatch(&self, procedure: u32, args: &[u8], results: &mut Vec<u8>) -> Dispatched {
//!         match procedure {
//!             1 => match xdr_spec_rt::rpc::decode_args::<Double>(args) {
//!                 Ok(n) => Reply::<Double>::new(results).ok(&(2 * n)).into(),
//!                 Err(_) => Dispatched::GarbageArgs,
//!             },
//!             _ => Dispatched::ProcUnavail,
//!         }
//!     }
//! }
//! let mut results = Vec::new();
//! assert_eq!(Server.dispatch(1, &21u32.to_vec().unwrap(), &mut results), Dispatched::Replied);
//! assert_eq!(results, 42u32.to_vec().unwrap());
//! assert_eq!(Server.dispatch(1, &[0, 0], &mut Vec::new()), Dispatched::GarbageArgs);
//! assert_eq!(Server.dispatch(9, &[], &mut Vec::new()), Dispatched::ProcUnavail);
//! ```
//!
//! Tuples of up to eight XDR values are XDR values too, one after another: the arguments of
//! a procedure that takes several.
//!
//! ```
//! use xdr_spec_rt::Xdr;
//! let two = (7i32, Some(9u32));
//! assert_eq!(two.to_vec().unwrap(), [0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 9]);
//! assert_eq!(<(i32, Option<u32>)>::decode(&two.to_vec().unwrap()).unwrap(), (two, 12));
//! assert_eq!(<(i32, u64) as Xdr>::FIXED_LEN, Some(12));
//! assert_eq!(<(i32, Option<u32>) as Xdr>::FIXED_LEN, None);
//! ```

use alloc::vec::Vec;
use core::future::Future;
use core::marker::PhantomData;

use crate::{Error, Reader, Result, Writer, Xdr};

/// XDR `void` (RFC 4506 section 4.16): no data. The arguments of a procedure that takes
/// none, and the results of one that returns none.
///
/// ```
/// use xdr_spec_rt::{rpc::Void, Xdr};
/// assert_eq!(Void.to_vec().unwrap(), Vec::<u8>::new());
/// assert_eq!(Void::decode(&[]).unwrap(), (Void, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Void;

impl<'a> Xdr<'a> for Void {
    const MIN_LEN: usize = 0;
    const FIXED_LEN: Option<usize> = Some(0);
    const PLAIN: bool = true;

    fn decode_from(_: &mut Reader<'a>) -> Result<Self> {
        Ok(Void)
    }

    fn encoded_len(&self) -> usize {
        0
    }

    fn encode_to(&self, _: &mut Writer<'_>) {}
}

/// Several values one after another: the arguments of a procedure that takes more than one
/// (RFC 5531 section 12: `int ADD(int, int) = 2;` encodes its two arguments in order).
macro_rules! xdr_tuple {
    ($($t:ident $v:ident),+) => {
        impl<'a, $($t: Xdr<'a>),+> Xdr<'a> for ($($t,)+) {
            const MIN_LEN: usize = 0 $(+ $t::MIN_LEN)+;
            const FIXED_LEN: Option<usize> = {
                let fixed = Some(0);
                $(let fixed = crate::fixed_add(fixed, $t::FIXED_LEN);)+
                fixed
            };
            const PLAIN: bool = true $(&& $t::PLAIN)+;
            const BOUNDED: bool = false $(|| $t::BOUNDED)+;

            fn validate(&self) -> Result<()> {
                let ($($v,)+) = self;
                $($v.validate()?;)+
                Ok(())
            }

            fn decode_from(r: &mut Reader<'a>) -> Result<Self> {
                Ok(($($t::decode_from(r)?,)+))
            }

            fn encoded_len(&self) -> usize {
                let ($($v,)+) = self;
                0usize $(.saturating_add($v.encoded_len()))+
            }

            fn encode_to(&self, w: &mut Writer<'_>) {
                let ($($v,)+) = self;
                $($v.encode_to(w);)+
            }
        }
    };
}

xdr_tuple!(A a, B b);
xdr_tuple!(A a, B b, C c);
xdr_tuple!(A a, B b, C c, D d);
xdr_tuple!(A a, B b, C c, D d, E e);
xdr_tuple!(A a, B b, C c, D d, E e, F f);
xdr_tuple!(A a, B b, C c, D d, E e, F f, G g);
xdr_tuple!(A a, B b, C c, D d, E e, F f, G g, H h);

/// One procedure of one version of an ONC RPC program: its numbers, its name, and the XDR
/// types of its arguments and results (RFC 5531 section 12: `results NAME(args) = number;`).
/// `xdr-spec` generates one type per procedure.
pub trait Procedure: 'static {
    /// The program number.
    const PROGRAM: u32;
    /// The version number.
    const VERSION: u32;
    /// The procedure number.
    const PROCEDURE: u32;
    /// The procedure's name in the specification, for errors and logs.
    const NAME: &'static str;
    /// Its arguments ([`Void`] for none), borrowing from the call message.
    type Args<'a>: Xdr<'a>;
    /// Its results ([`Void`] for none), borrowing from the reply message.
    type Results<'a>: Xdr<'a>;
}

/// Decodes procedure `P`'s arguments from `args`, the whole of a call message after its RPC
/// header: bytes left after the arguments are an error too ([`Error::Trailing`]), since a
/// call whose arguments do not take exactly what it carries is not the procedure's.
///
/// ```
/// use xdr_spec_rt::rpc::{decode_args, Procedure};
/// struct Echo;
/// impl Procedure for Echo {
///     const PROGRAM: u32 = 1;
///     const VERSION: u32 = 1;
///     const PROCEDURE: u32 = 1;
///     const NAME: &'static str = "ECHO";
///     type Args<'a> = u32;
///     type Results<'a> = u32;
/// }
/// assert_eq!(decode_args::<Echo>(&[0, 0, 0, 7]), Ok(7));
/// assert!(decode_args::<Echo>(&[0, 0, 0, 7, 0]).is_err());
/// ```
pub fn decode_args<P: Procedure>(args: &[u8]) -> Result<P::Args<'_>> {
    exactly::<P::Args<'_>>(args, "arguments")
}

/// A value that takes all of `bytes`.
fn exactly<'a, T: Xdr<'a>>(bytes: &'a [u8], what: &'static str) -> Result<T> {
    let (value, used) = T::decode(bytes)?;
    if used != bytes.len() {
        return Err(Error::Trailing { what, len: bytes.len() - used });
    }
    Ok(value)
}

/// Appends `value`'s encoding to `out`: checked against the specification's bounds first,
/// so that nothing is appended for a value that has no encoding.
///
/// ```
/// let mut out = vec![9];
/// xdr_spec_rt::rpc::encode_append(&5u32, &mut out).unwrap();
/// assert_eq!(out, [9, 0, 0, 0, 5]);
/// ```
pub fn encode_append<'a, T: Xdr<'a>>(value: &T, out: &mut Vec<u8>) -> Result<usize> {
    if T::BOUNDED {
        value.validate()?;
    }
    let start = out.len();
    let need = value.encoded_len();
    out.resize(start.saturating_add(need), 0);
    match value.encode(&mut out[start..]) {
        Ok(n) => Ok(n),
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

/// How a [`Program`] answered a call; the transport turns it into the RPC reply (RFC 5531
/// section 9: an accepted reply's status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatched {
    /// The procedure ran and its results were appended: SUCCESS.
    Replied,
    /// No such procedure in this version: PROC_UNAVAIL.
    ProcUnavail,
    /// The arguments did not decode as the procedure's: GARBAGE_ARGS.
    GarbageArgs,
    /// The procedure failed (its method said so): SYSTEM_ERR.
    SystemErr,
    /// The results the method gave break a bound of the specification (a string or array
    /// longer than its `<N>`), so they have no encoding: SYSTEM_ERR, and the transport says
    /// why in its log.
    BadResults(Error),
}

/// The answer a [`Reply`] gave: the only way to make one is to answer, so a generated
/// `Service` method that returns has answered its call exactly once.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a Service method returns the answer its Reply gave"]
pub struct Replied(Dispatched);

impl From<Replied> for Dispatched {
    fn from(r: Replied) -> Dispatched {
        r.0
    }
}

/// Where a server's method answers procedure `P`'s call: its results, encoded straight into
/// the reply message, or a failure.
pub struct Reply<'r, P: Procedure> {
    results: &'r mut Vec<u8>,
    procedure: PhantomData<fn() -> P>,
}

impl<'r, P: Procedure> Reply<'r, P> {
    /// A reply whose results go at the end of `results` (after the RPC reply header the
    /// transport wrote there).
    pub fn new(results: &'r mut Vec<u8>) -> Self {
        Reply { results, procedure: PhantomData }
    }

    /// Answers with `results`: SUCCESS, or SYSTEM_ERR ([`Dispatched::BadResults`]) when they
    /// break a bound of the specification.
    pub fn ok(self, results: &P::Results<'_>) -> Replied {
        match encode_append(results, self.results) {
            Ok(_) => Replied(Dispatched::Replied),
            Err(e) => Replied(Dispatched::BadResults(e)),
        }
    }

    /// Answers SYSTEM_ERR: the procedure could not be carried out (RFC 5531 section 9,
    /// "e.g. memory allocation failure").
    pub fn system_err(self) -> Replied {
        Replied(Dispatched::SystemErr)
    }

    /// Answers GARBAGE_ARGS: the arguments decoded but make no sense to the procedure.
    pub fn garbage_args(self) -> Replied {
        Replied(Dispatched::GarbageArgs)
    }
}

/// One version of one program, as a server serves it: the generated `Server` wrapper of a
/// version's `Service` trait implements it.
pub trait Program: Send + Sync {
    /// The program number.
    fn program(&self) -> u32;
    /// The version number.
    fn version(&self) -> u32;
    /// Serves procedure `procedure` of this version on `args` (the call message after its
    /// RPC header), appending its results to `results`.
    fn dispatch(&self, procedure: u32, args: &[u8], results: &mut Vec<u8>) -> Dispatched;
}

/// One DDP-eligible data item (RFC 8166 section 6.1) of a procedure's arguments or results:
/// where its data starts (just after its length word, which stays in the stream) and its
/// length without XDR padding. Offsets count from the start of the arguments or results,
/// not of the RPC message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Item {
    /// Where the item's data starts.
    pub offset: usize,
    /// Its length, padding excluded.
    pub len: usize,
}

impl Item {
    /// The item whose length word is next in `r`: its data starts after the word. With
    /// `reduced` its data is absent (it went into a chunk); otherwise it must follow, with
    /// its padding, in what `r` has left: `None` when it does not. For generated bindings.
    ///
    /// ```
    /// use xdr_spec_rt::{rpc::Item, Reader};
    /// // A word, then a 5-byte opaque<> whose length word is at 4.
    /// let stream = [0, 0, 0, 9, 0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0];
    /// assert_eq!(Item::at(&mut Reader::new(&stream[4..]), false).unwrap(), Some(Item { offset: 4, len: 5 }));
    /// assert_eq!(Item::at(&mut Reader::new(&stream[4..8]), false).unwrap(), None, "its data is not there");
    /// assert_eq!(Item::at(&mut Reader::new(&stream[4..8]), true).unwrap(), Some(Item { offset: 4, len: 5 }));
    /// ```
    pub fn at(r: &mut Reader<'_>, reduced: bool) -> Result<Option<Item>> {
        let len = r.u32()? as usize;
        let item = Item { offset: r.position(), len };
        let padded = len.saturating_add(crate::pad(len));
        Ok((reduced || padded <= r.remaining()).then_some(item))
    }
}

/// A number read by a generated binding's walk, as the size it gives. (Generated walks call
/// these helpers rather than write `Ok(Some(..))`: a specification's own types, in scope
/// there, may be named `Ok` or `Some`.)
pub fn number(n: u64) -> Result<Option<usize>> {
    Ok(Some(usize::try_from(n).unwrap_or(usize::MAX)))
}

/// What a generated binding's walk gives where the message holds no item there (another
/// union arm).
pub fn elsewhere<T>() -> Result<Option<T>> {
    Ok(None)
}

/// A size read from a call's arguments (`n`, as a generated binding's walk gives it), plus
/// `plus`, at most `cap`: `None` where it could not be read. For generated bindings.
///
/// ```
/// use xdr_spec_rt::rpc::capped;
/// assert_eq!(capped(Ok(Some(4096)), 1024, 1 << 20), Some(5120));
/// assert_eq!(capped(Ok(Some(usize::MAX)), 1024, 1 << 20), Some(1 << 20));
/// assert_eq!(capped(Ok(None), 1024, 1 << 20), None);
/// ```
pub fn capped(n: Result<Option<usize>>, plus: usize, cap: usize) -> Option<usize> {
    n.ok().flatten().map(|n| n.saturating_add(plus).min(cap))
}

/// One version of a program's Upper-Layer Binding (RFC 8166 section 6): which items of its
/// procedures' arguments and results are DDP-eligible, how large a result may be, and how
/// large a reply. `xdr-spec` generates one per version from a binding file beside the
/// specification (`Build::binding`); the transport turns it into its own interface
/// (`negotiate::service::Bindings`). Everything is read from the arguments and results as
/// bytes, after their RPC headers; a procedure with nothing declared has nothing
/// DDP-eligible.
pub trait Binding: Send + Sync {
    /// The program number.
    fn program(&self) -> u32;
    /// The version number.
    fn version(&self) -> u32;
    /// Appends the DDP-eligible items of procedure `procedure`'s arguments `args`, in stream
    /// order; nothing where `args` is not the procedure's or too short.
    fn argument_items(&self, procedure: u32, args: &[u8], out: &mut Vec<Item>);
    /// Appends, for the call whose arguments are `args`, the largest length of each
    /// DDP-eligible result its reply may carry, in stream order (RFC 8166 section 3.4.6: a
    /// Write chunk that size is provided for each).
    fn result_maxima(&self, procedure: u32, args: &[u8], out: &mut Vec<usize>);
    /// The largest whole RPC reply message to the call whose arguments are `args`, its
    /// DDP-eligible results reduced (RFC 8166 section 6.2).
    fn max_reply(&self, procedure: u32, args: &[u8]) -> usize;
    /// Appends the DDP-eligible items of `results`, the results of the call whose arguments
    /// are `args`. The first `reduced` are absent from `results` (their data went into Write
    /// chunks): for those, where the data belongs and the length its length word declares.
    fn result_items(&self, procedure: u32, args: &[u8], results: &[u8], reduced: usize, out: &mut Vec<Item>);
}

/// A call's arguments, owned: the whole call message and where its arguments start, for an
/// async server's method, whose future outlives the server's buffer ([`AsyncProgram`]).
/// Checked once to decode as procedure `P`'s; [`Args::get`] reads them in place.
///
/// ```
/// use xdr_spec_rt::rpc::{Args, Procedure};
/// struct Double;
/// impl Procedure for Double {
///     const PROGRAM: u32 = 1;
///     const VERSION: u32 = 1;
///     const PROCEDURE: u32 = 1;
///     const NAME: &'static str = "DOUBLE";
///     type Args<'a> = u32;
///     type Results<'a> = u32;
/// }
/// let args = Args::<Double>::new(vec![0xee, 0xee, 0, 0, 0, 21], 2).unwrap();
/// assert_eq!(args.get(), 21);
/// assert!(Args::<Double>::new(vec![0, 0, 0, 21, 0], 0).is_err());
/// ```
pub struct Args<P: Procedure> {
    message: Vec<u8>,
    at: usize,
    procedure: PhantomData<fn() -> P>,
}

impl<P: Procedure> Args<P> {
    /// The arguments of `message` from byte `at` on, checked to decode as `P`'s exactly.
    pub fn new(message: Vec<u8>, at: usize) -> Result<Self> {
        let args = message.get(at..).ok_or(Error::Truncated { at, need: at.saturating_sub(message.len()) })?;
        decode_args::<P>(args)?;
        Ok(Args { message, at, procedure: PhantomData })
    }

    /// The arguments, borrowing from the call message.
    pub fn get(&self) -> P::Args<'_> {
        decode_args::<P>(&self.message[self.at..]).expect("checked in Args::new")
    }
}

/// An async server method's answer: the results encoded, or a failure ([`Dispatched`]).
/// Made only by [`Answer::ok`] (results of a procedure's own type) and [`Answer::of`] (a
/// failure), so that SUCCESS always carries encoded results.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    dispatched: Dispatched,
    results: Vec<u8>,
}

impl Answer {
    /// Procedure `P`'s `results`: SUCCESS, or SYSTEM_ERR ([`Dispatched::BadResults`]) when
    /// they break a bound of the specification.
    pub fn ok<P: Procedure>(results: &P::Results<'_>) -> Answer {
        let mut out = Vec::new();
        match encode_append(results, &mut out) {
            Ok(_) => Answer { dispatched: Dispatched::Replied, results: out },
            Err(e) => Answer::of(Dispatched::BadResults(e)),
        }
    }

    /// A failure: SYSTEM_ERR, GARBAGE_ARGS or PROC_UNAVAIL, with no results. (SUCCESS has
    /// results: [`Dispatched::Replied`] here is SYSTEM_ERR.)
    pub fn of(dispatched: Dispatched) -> Answer {
        let dispatched = if dispatched == Dispatched::Replied { Dispatched::SystemErr } else { dispatched };
        Answer { dispatched, results: Vec::new() }
    }

    /// How the call was answered, and the encoded results (empty unless
    /// [`Dispatched::Replied`]).
    pub fn into_parts(self) -> (Dispatched, Vec<u8>) {
        (self.dispatched, self.results)
    }
}

/// A future of an [`Answer`], as an [`AsyncProgram`] gives it.
pub type AnswerFuture = core::pin::Pin<alloc::boxed::Box<dyn Future<Output = Answer> + Send + 'static>>;

/// `future`, boxed as an [`AsyncProgram`] gives it. For generated code.
pub fn boxed(future: impl Future<Output = Answer> + Send + 'static) -> AnswerFuture {
    alloc::boxed::Box::pin(future)
}

/// An answer with no results (SYSTEM_ERR, GARBAGE_ARGS, PROC_UNAVAIL), ready at once. For
/// generated code.
pub fn ready(dispatched: Dispatched) -> AnswerFuture {
    boxed(core::future::ready(Answer::of(dispatched)))
}

/// The shared pointer an `AsyncServer` holds its service by (each call's future holds it
/// too). (A target with no pointer-width atomics has no `Arc`, and so no async servers.)
pub use alloc::sync::Arc;

/// One version of one program, as an async server serves it: the generated `AsyncServer`
/// wrapper of a version's `AsyncService` trait implements it. The transport decodes the RPC
/// header and runs the future on its executor (`negotiate::service::AsyncServices`).
pub trait AsyncProgram: Send + Sync {
    /// The program number.
    fn program(&self) -> u32;
    /// The version number.
    fn version(&self) -> u32;
    /// The future of procedure `procedure`'s answer to the call `message`, whose arguments
    /// start at byte `at`.
    fn dispatch(&self, procedure: u32, message: Vec<u8>, at: usize) -> AnswerFuture;
}

/// A procedure's results, decoded in place from the reply message that carried them.
///
/// ```
/// use xdr_spec_rt::rpc::{Procedure, Results};
/// struct Get;
/// impl Procedure for Get {
///     const PROGRAM: u32 = 1;
///     const VERSION: u32 = 1;
///     const PROCEDURE: u32 = 2;
///     const NAME: &'static str = "GET";
///     type Args<'a> = u32;
///     type Results<'a> = Option<u32>;
/// }
/// // A reply message whose results start at byte 2: an optional u32, present, 7.
/// let message = vec![0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 7];
/// let results = Results::<Get>::new(message, 2).unwrap();
/// assert_eq!(results.get(), Some(7));
/// assert!(Results::<Get>::new(vec![0, 0, 0, 1], 0).is_err(), "a value promised, none there");
/// assert!(Results::<Get>::new(vec![0, 0, 0, 0, 0], 0).is_err(), "a byte left over");
/// ```
pub struct Results<P: Procedure> {
    message: Vec<u8>,
    at: usize,
    // (`fn() -> P`: the results are `Send` and `Sync` whatever the procedure's marker is.)
    procedure: PhantomData<fn() -> P>,
}

impl<P: Procedure> Results<P> {
    /// The results of `message` from byte `at` on, checked once here to decode as `P`'s and
    /// to take all the bytes after `at`.
    pub fn new(message: Vec<u8>, at: usize) -> Result<Self> {
        let body = message.get(at..).ok_or_else(|| Error::Truncated { at, need: at.saturating_sub(message.len()) })?;
        exactly::<P::Results<'_>>(body, "results")?;
        Ok(Results { message, at, procedure: PhantomData })
    }

    /// The results, borrowing from the reply message.
    pub fn get(&self) -> P::Results<'_> {
        exactly::<P::Results<'_>>(&self.message[self.at..], "results").expect("checked in Results::new")
    }

    /// The whole reply message, RPC header included.
    pub fn into_message(self) -> Vec<u8> {
        self.message
    }
}

impl<P: Procedure> core::fmt::Debug for Results<P>
where
    for<'a> P::Results<'a>: core::fmt::Debug,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Results").field(&self.get()).finish()
    }
}

/// A call of procedure `P`, encoded by a [`Caller`] and not sent yet: its XID and the whole
/// call message (the RPC header, then the arguments).
pub struct Call<P: Procedure> {
    xid: u32,
    message: Vec<u8>,
    procedure: PhantomData<fn() -> P>,
}

impl<P: Procedure> Call<P> {
    /// Call `xid`, whose message is `message`.
    pub fn new(xid: u32, message: Vec<u8>) -> Self {
        Call { xid, message, procedure: PhantomData }
    }

    /// Its XID.
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// Its XID and message.
    pub fn into_parts(self) -> (u32, Vec<u8>) {
        (self.xid, self.message)
    }
}

/// A transport that calls procedures: it builds the RPC call (its XID, program, version and
/// procedure numbers) around the encoded arguments, sends it, and gives back the results or
/// why there are none. The generated `Client` of a version calls through one.
///
/// An async call is two steps, [`Caller::encode`] then [`Caller::send_async`], so that the
/// future holds the encoded call and not the borrowed arguments: it can be spawned on a
/// multi-threaded executor.
pub trait Caller: Sync {
    /// Why a call has no results: the transport's failure, the server's RPC-level refusal
    /// (PROG_UNAVAIL and the others), or results that do not decode.
    type Error: Send;

    /// Calls procedure `P` with `args` and waits for its results.
    fn call<P: Procedure>(&self, args: &P::Args<'_>) -> core::result::Result<Results<P>, Self::Error>;

    /// Encodes the call of procedure `P` with `args`, for [`Caller::send_async`].
    fn encode<P: Procedure>(&self, args: &P::Args<'_>) -> core::result::Result<Call<P>, Self::Error>;

    /// Sends `call` and gives its results, as a future.
    fn send_async<P: Procedure>(
        &self,
        call: Call<P>,
    ) -> impl Future<Output = core::result::Result<Results<P>, Self::Error>> + Send;
}
