//! Protection domains and memory regions, and the one routine that moves bytes between
//! regions under their locks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use super::{keys, lock};
use crate::{Access, Error, MemoryRegion, ProtectionDomain, RemoteBuf, Result};

/// An in-process protection domain. Cheap to clone; clones are the same domain.
#[derive(Clone)]
pub struct InProcPd(pub(crate) Arc<PdShared>);

pub(crate) struct PdShared {
    pub(crate) id: u64,
    /// rkey -> what it names. Region entries are weak, so a region whose handles are all
    /// dropped dies (and its Drop removes the entry); lookups upgrade under this lock and drop
    /// the guard before the Arc. Window entries hold their region: a window keeps it alive.
    table: Mutex<HashMap<u32, Key>>,
}

/// Enters `key` under `rkey` in a domain's table, keeping room for twice its live keys. Every
/// call's windows come and go under fresh rkeys, so the table fills with the tombstones of
/// removed keys; a full one rehashes on its next insert, in place while its live keys are at
/// most half of what it holds, and otherwise into a larger allocation. Left to itself that
/// happened at whatever moment the tombstones ran out, sometimes with more keys live than
/// the warm-up ever had at such a moment: one allocation in a steady state of calls now and
/// then (negotiate/tests/allocations.rs, lent results). Grown here as soon as the live keys
/// pass a quarter of what it holds, it grows only as far as the most keys ever live at once,
/// and every later rehash is in place.
fn enter(table: &mut HashMap<u32, Key>, rkey: u32, key: Key) {
    let live = table.len() + 1;
    if table.capacity() < 2 * live {
        table.reserve(live);
    }
    table.insert(rkey, key);
}

/// What an rkey of a protection domain names.
enum Key {
    Region(Weak<RegionInner>),
    Window(Window),
}

/// A memory window: `len` bytes at `offset` of `region`, open to `access` from the peer of
/// queue pair `qp` only (a type-2 window's binding).
struct Window {
    region: Arc<RegionInner>,
    offset: usize,
    len: usize,
    access: Access,
    qp: u64,
}

impl PdShared {
    /// Resolves a peer's RDMA access of `len` bytes at `addr` through `rkey`, arriving on
    /// queue pair `qp` and needing `need`: the region and the offset in it. The region's own
    /// liveness and bounds are checked again under its lock, by the transfer.
    pub(crate) fn resolve(
        &self,
        rkey: u32,
        addr: u64,
        len: usize,
        need: Access,
        qp: u64,
    ) -> Option<(Arc<RegionInner>, usize)> {
        let table = lock(&self.table);
        let (region, lo, hi, access) = match table.get(&rkey)? {
            Key::Region(w) => {
                let r = w.upgrade()?;
                let (lo, hi, access) = (r.addr, r.addr.checked_add(r.len as u64)?, r.access);
                (r, lo, hi, access)
            }
            Key::Window(w) if w.qp == qp => {
                let lo = w.region.addr + w.offset as u64;
                (w.region.clone(), lo, lo + w.len as u64, w.access)
            }
            Key::Window(_) => return None,
        };
        drop(table);
        let end = addr.checked_add(len as u64)?;
        (access.contains(need) && addr >= lo && end <= hi).then(|| (region.clone(), (addr - region.addr) as usize))
    }

    /// Local Invalidate posted on queue pair `qp`: kills a window `qp` bound, or the keys of a
    /// region of this domain. False if `rkey` names neither.
    pub(crate) fn invalidate_local(&self, rkey: u32, qp: u64) -> bool {
        let mut table = lock(&self.table);
        match table.get(&rkey) {
            Some(Key::Window(w)) if w.qp == qp => {
                let gone = table.remove(&rkey);
                drop(table);
                drop(gone);
                true
            }
            Some(Key::Region(w)) => {
                let Some(region) = w.upgrade() else { return false };
                drop(table);
                let mut data = lock(&region.data);
                std::mem::replace(&mut data.valid, false)
            }
            _ => false,
        }
    }

    /// The receiver's half of a Send with Invalidate arriving on queue pair `qp`: only a window
    /// that `qp` bound may be invalidated remotely.
    pub(crate) fn invalidate_remote(&self, rkey: u32, qp: u64) -> bool {
        let mut table = lock(&self.table);
        if !matches!(table.get(&rkey), Some(Key::Window(w)) if w.qp == qp) {
            return false;
        }
        let gone = table.remove(&rkey);
        drop(table);
        drop(gone);
        true
    }

    /// Binds a window for queue pair `qp` (arguments already checked by `check_window`);
    /// `None` if the region is not of this domain or is dead.
    pub(crate) fn bind_window(
        &self,
        region: &InProcRegion,
        offset: usize,
        len: usize,
        access: Access,
        qp: u64,
    ) -> Option<RemoteBuf> {
        let r = &region.0;
        if r.pd.id != self.id || !lock(&r.data).valid {
            return None;
        }
        let rkey = keys::next_key();
        let w = Window { region: r.clone(), offset, len, access, qp };
        enter(&mut lock(&self.table), rkey, Key::Window(w));
        Some(RemoteBuf { addr: r.addr + offset as u64, rkey })
    }

    /// Forgets the windows queue pair `qp` bound (it is gone; nobody can reach them).
    pub(crate) fn unbind_all(&self, qp: u64) {
        let mut table = lock(&self.table);
        let mut gone = Vec::new();
        table.retain(|_, k| match k {
            Key::Window(w) if w.qp == qp => {
                gone.push(w.region.clone());
                false
            }
            _ => true,
        });
        drop(table);
        // The windows' regions may be dropped here, outside the table lock their Drop takes.
        drop(gone);
    }
}

impl InProcPd {
    pub(crate) fn new() -> Self {
        InProcPd(Arc::new(PdShared { id: keys::next_id(), table: Mutex::new(HashMap::new()) }))
    }
}

impl ProtectionDomain for InProcPd {
    type Region = InProcRegion;

    fn register(&self, buf: Vec<u8>, access: Access) -> Result<InProcRegion> {
        if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE) {
            return Err(Error::InvalidAccess(access));
        }
        let rkey = keys::next_key();
        let inner = Arc::new(RegionInner {
            id: keys::next_id(),
            pd: self.0.clone(),
            addr: keys::random_base(),
            len: buf.len(),
            rkey,
            lkey: keys::next_key(),
            access,
            data: Mutex::new(RegionData { buf, valid: true, registered: true }),
        });
        enter(&mut lock(&self.0.table), rkey, Key::Region(Arc::downgrade(&inner)));
        Ok(InProcRegion(inner))
    }
}

/// An in-process registered memory region; clones are handles to the same region.
#[derive(Clone)]
pub struct InProcRegion(pub(crate) Arc<RegionInner>);

impl std::fmt::Debug for InProcRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcRegion")
            .field("addr", &format_args!("{:#x}", self.0.addr))
            .field("len", &self.0.len)
            .field("rkey", &format_args!("{:#010x}", self.0.rkey))
            .field("access", &self.0.access)
            .finish()
    }
}

pub(crate) struct RegionInner {
    /// Orders lock acquisition when two regions are locked together.
    pub(crate) id: u64,
    pub(crate) pd: Arc<PdShared>,
    pub(crate) addr: u64,
    pub(crate) len: usize,
    pub(crate) rkey: u32,
    lkey: u32,
    pub(crate) access: Access,
    pub(crate) data: Mutex<RegionData>,
}

pub(crate) struct RegionData {
    pub(crate) buf: Vec<u8>,
    /// Keys alive: false after Local Invalidate, remote invalidation or deregistration.
    pub(crate) valid: bool,
    registered: bool,
}

impl Drop for RegionInner {
    fn drop(&mut self) {
        lock(&self.pd.table).remove(&self.rkey);
    }
}

impl MemoryRegion for InProcRegion {
    fn addr(&self) -> u64 {
        self.0.addr
    }
    fn len(&self) -> usize {
        self.0.len
    }
    fn rkey(&self) -> u32 {
        self.0.rkey
    }
    fn lkey(&self) -> u32 {
        self.0.lkey
    }
    fn access(&self) -> Access {
        self.0.access
    }
    fn with<T>(&self, f: impl FnOnce(&[u8]) -> T) -> T {
        f(&lock(&self.0.data).buf)
    }
    fn with_mut<T>(&self, f: impl FnOnce(&mut [u8]) -> T) -> T {
        f(&mut lock(&self.0.data).buf)
    }
    type Bytes<'a> = RegionBytes<'a>;
    fn bytes(&self) -> RegionBytes<'_> {
        RegionBytes(lock(&self.0.data))
    }
    fn deregister(self) -> Result<Vec<u8>> {
        let buf = {
            let mut data = lock(&self.0.data);
            if !data.registered {
                return Err(Error::NotRegistered);
            }
            data.registered = false;
            data.valid = false;
            std::mem::take(&mut data.buf)
        };
        lock(&self.0.pd.table).remove(&self.0.rkey);
        Ok(buf)
    }
}

/// An in-process region's bytes held for reading ([`MemoryRegion::bytes`]).
pub struct RegionBytes<'a>(std::sync::MutexGuard<'a, RegionData>);

impl std::ops::Deref for RegionBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0.buf
    }
}

/// Which end of a transfer refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    Src,
    Dst,
}

/// What an end of a transfer must satisfy, checked under the region's lock so that a
/// concurrent invalidation or deregistration is either wholly before or wholly after.
#[derive(Clone, Copy)]
pub(crate) enum Rule {
    /// Local use by a queue pair of protection domain `pd`; `write` needs LOCAL_WRITE.
    Local { pd: u64, write: bool },
    /// Remote use through a key that [`PdShared::resolve`] accepted (rights and window
    /// checked there): the region must still be alive and the range inside it.
    Remote,
}

impl Rule {
    pub(crate) fn allows(self, r: &RegionInner, d: &RegionData, off: usize, len: usize) -> bool {
        let in_range = off.checked_add(len).is_some_and(|end| end <= d.buf.len());
        let rights = match self {
            Rule::Local { pd, write } => r.pd.id == pd && (!write || r.access.contains(Access::LOCAL_WRITE)),
            Rule::Remote => true,
        };
        d.valid && in_range && rights
    }
}

/// Checks `rule` for `len` bytes at `off` of `r` without moving anything.
pub(crate) fn check(r: &RegionInner, off: usize, len: usize, rule: Rule) -> bool {
    rule.allows(r, &lock(&r.data), off, len)
}

/// Copies `len` bytes from `src` at `src_off` to `dst` at `dst_off` if both ends pass their
/// rules; otherwise touches nothing and says which end failed (the source is checked first).
/// Two distinct regions are locked in id order, so concurrent transfers in opposite
/// directions cannot deadlock; a region copied onto itself is locked once.
pub(crate) fn transfer(
    src: &RegionInner,
    src_off: usize,
    src_rule: Rule,
    dst: &RegionInner,
    dst_off: usize,
    dst_rule: Rule,
    len: usize,
) -> Result<(), Fault> {
    if src.id == dst.id {
        let mut d = lock(&src.data);
        if !src_rule.allows(src, &d, src_off, len) {
            return Err(Fault::Src);
        }
        if !dst_rule.allows(dst, &d, dst_off, len) {
            return Err(Fault::Dst);
        }
        d.buf.copy_within(src_off..src_off + len, dst_off);
        return Ok(());
    }
    let (s, mut d) = if src.id < dst.id {
        let s = lock(&src.data);
        (s, lock(&dst.data))
    } else {
        let d = lock(&dst.data);
        (lock(&src.data), d)
    };
    if !src_rule.allows(src, &s, src_off, len) {
        return Err(Fault::Src);
    }
    if !dst_rule.allows(dst, &d, dst_off, len) {
        return Err(Fault::Dst);
    }
    d.buf[dst_off..dst_off + len].copy_from_slice(&s.buf[src_off..src_off + len]);
    Ok(())
}
