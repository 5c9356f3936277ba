//! draft-ietf-nfsv4-rpcrdma-version-two-07's transport properties (section 5), read and
//! written through `draft07::properties` and carried in CONNPROP messages that
//! `draft07::header` parses and `draft07::continuation` sequences; every rule named by its
//! section.

use proptest::prelude::*;
use rpcrdma_v2::draft07::continuation::{Reassembly, Step};
use rpcrdma_v2::draft07::header::Header;
use rpcrdma_v2::draft07::properties::{BadPropval, Properties, ReverseDirection};
use rpcrdma_v2::draft07::xdr::*;
use rpcrdma_v2::rt::{Seq, Xdr};
use rpcrdma_v2::HeaderLimits;

fn set<'a>(vals: &'a [Rpcrdma2Propval<'a>]) -> Rpcrdma2Propset<'a> {
    Rpcrdma2Propset(Seq::from_slice(vals))
}

fn val(which: u32, data: &[u8]) -> Rpcrdma2Propval<'_> {
    Rpcrdma2Propval { rdma_which: which, rdma_data: data }
}

/// Section 5.2, Table 1: the defaults of a peer that states nothing.
#[test]
fn section_5_2_table_1_defaults() {
    let p = Properties::from_propset(&set(&[])).unwrap();
    assert_eq!(
        (p.max_send_size, p.receive_buffer_size, p.max_segment_size, p.max_segment_count),
        (4096, 4096, 1_048_576, 16)
    );
    assert_eq!(p.reverse_direction, ReverseDirection::None, "5.2.5: the default is no support");
    assert_eq!(p.host_auth, None, "5.2.6: not present, the peer stays unauthenticated");
}

/// Section 5.1: "A zero-length rdma_data field represents the default value of the property
/// specified by rdma_which."
#[test]
fn section_5_1_an_empty_rdma_data_is_the_default() {
    let stated = Properties::from_propset(&set(&[val(RDMA2_PROPID_RBSIZ, &[0, 0, 0x20, 0])])).unwrap();
    assert_eq!(stated.receive_buffer_size, 8192);
    let back = stated.apply(&set(&[val(RDMA2_PROPID_RBSIZ, &[])])).unwrap();
    assert_eq!(back.receive_buffer_size, 4096);
}

/// Section 5.1: a recognized property whose rdma_data "is not valid when interpreted using
/// the property-associated typedef" or whose length "is insufficient" MUST be reported with
/// RDMA2_ERR_BAD_PROPVAL; and 7.2.2: the receiver applies none of the message's settings.
#[test]
fn section_5_1_a_value_not_of_its_type_is_bad_propval_and_nothing_applies() {
    let before = Properties { max_send_size: 9000, ..Properties::default() };
    // A host auth opaque<> whose length word claims more than rdma_data holds.
    let claims_more = [0, 0, 0, 9, 1, 2, 3, 4];
    for (which, data) in [
        (RDMA2_PROPID_RBSIZ, &[0, 0, 0x20][..]),
        (RDMA2_PROPID_RSSIZ, &[0, 0, 0, 1, 0][..]),
        (RDMA2_PROPID_BRS, &[1][..]),
        (RDMA2_PROPID_HOSTAUTH, &claims_more[..]),
    ] {
        // A good value first: the whole set is refused (no partial result comes back to
        // apply).
        let vals = [val(RDMA2_PROPID_SBSIZ, &[0, 0, 0x40, 0]), val(which, data)];
        let e = before.apply(&set(&vals)).unwrap_err();
        assert_eq!(e, BadPropval { which, len: data.len() });
        assert_eq!(e.answer(), Rpcrdma2HdrError::Default { discriminant: RDMA2_ERR_BAD_PROPVAL });
    }
}

/// Section 5.1: "A receiver does not report an error if it does not recognize the value
/// contained in rdma_which. In that case, the receiver does not process that
/// rpcrdma2_propval. Processing continues with the next rpcrdma2_propval, if any."
#[test]
fn section_5_1_an_unrecognized_property_is_skipped_and_the_rest_applied() {
    let vals = [val(77, &[1, 2, 3]), val(RDMA2_PROPID_RCSIZ, &[0, 0, 0, 32]), val(0, &[])];
    let p = Properties::from_propset(&set(&vals)).unwrap();
    assert_eq!(p.max_segment_count, 32);
}

/// Appendix B.3 with section 5.1: properties the base does not define are kept for an
/// extension, each once with its last value, and a peer stating many more, across as many
/// CONNPROP messages as it likes, makes a receiver keep no more than `OTHERS_MOST` of them
/// and `OTHERS_BYTES_MOST` bytes.
#[test]
fn appendix_b_3_unrecognized_properties_are_kept_within_bounds_a_peer_cannot_move() {
    use rpcrdma_v2::draft07::properties::{OTHERS_BYTES_MOST, OTHERS_MOST};
    let twice = [val(100, b"one"), val(101, b"x"), val(100, b"two")];
    let p = Properties::from_propset(&set(&twice)).unwrap();
    assert_eq!(p.others, [(100, b"two".to_vec()), (101, b"x".to_vec())]);
    // Many small ones, message after message: no more than OTHERS_MOST.
    let mut p = Properties::default();
    for round in 0..20u32 {
        let ids: Vec<u32> = (0..50).map(|i| 1000 + round * 50 + i).collect();
        let vals: Vec<_> = ids.iter().map(|&w| val(w, &[1, 2, 3, 4])).collect();
        p = p.apply(&set(&vals)).unwrap();
    }
    assert_eq!(p.others.len(), OTHERS_MOST);
    // Large ones: no more than OTHERS_BYTES_MOST bytes.
    let big = vec![7u8; 1000];
    let vals: Vec<_> = (0..20).map(|i| val(2000 + i, &big)).collect();
    let p = Properties::default().apply(&set(&vals)).unwrap();
    assert!(p.others.iter().map(|(_, d)| d.len()).sum::<usize>() <= OTHERS_BYTES_MOST);
    assert_eq!(p.others.len(), OTHERS_BYTES_MOST / 1000);
}

/// Section 5.2.6: the host authentication material is carried to the caller as it came; an
/// unknown reverse-direction level (an extension's) is kept, and honoured as none.
#[test]
fn section_5_2_6_host_auth_reaches_the_caller_intact() {
    let auth = Rpcrdma2PropHostauth(b"challenge").to_vec().unwrap();
    let vals = [val(RDMA2_PROPID_HOSTAUTH, &auth), val(RDMA2_PROPID_BRS, &[0, 0, 0, 9])];
    let p = Properties::from_propset(&set(&vals)).unwrap();
    assert_eq!(p.host_auth.as_deref(), Some(&b"challenge"[..]));
    assert_eq!(p.reverse_direction, ReverseDirection::Unknown(9));
}

fn reverse() -> impl Strategy<Value = ReverseDirection> {
    prop_oneof![
        Just(ReverseDirection::None),
        Just(ReverseDirection::Simple),
        Just(ReverseDirection::Continued),
        Just(ReverseDirection::General),
        (4u32..100).prop_map(ReverseDirection::Unknown),
    ]
}

proptest! {
    /// Sections 5.1, 6.3.3 and 6.3.4: whatever this side states goes out in CONNPROP
    /// messages each within the threshold, MIDDLE ones then a FINAL, which a receiver parses,
    /// sequences and applies in order to get back exactly what was stated.
    #[test]
    fn stated_properties_come_back_through_connprop_messages(
        sbsiz in any::<u32>(), rbsiz in any::<u32>(), rssiz in any::<u32>(), rcsiz in any::<u32>(),
        brs in reverse(), auth in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3000)),
        threshold in 64usize..4096,
        extension in proptest::collection::vec((100u32..120, proptest::collection::vec(any::<u8>(), 0..16)), 0..4),
    ) {
        // An extension's properties (Appendix B.3): identifiers the base does not define, each
        // stated once.
        let mut others: Vec<(u32, Vec<u8>)> = Vec::new();
        for (which, data) in extension {
            if !others.iter().any(|(w, _)| *w == which) {
                others.push((which, data));
            }
        }
        let ours = Properties {
            max_send_size: sbsiz, receive_buffer_size: rbsiz, max_segment_size: rssiz,
            max_segment_count: rcsiz, reverse_direction: brs, host_auth: auth, others,
        };
        let Some(messages) = ours.connprop_messages(0, 32, threshold) else {
            // Only when the host auth alone is over the threshold.
            let auth_len = ours.host_auth.as_ref().map_or(0, |a| 8 + 4 + a.len().div_ceil(4) * 4);
            prop_assert!(20 + auth_len > threshold);
            return Ok(());
        };
        let mut r = Reassembly::new(1 << 20);
        let mut theirs = Properties::default();
        for (n, m) in messages.iter().enumerate() {
            prop_assert!(m.len() <= threshold, "a {}-byte CONNPROP over {}", m.len(), threshold);
            let h = Header::parse(m, &HeaderLimits::default()).unwrap();
            let last = n + 1 == messages.len();
            prop_assert_eq!(h.header_type() == rpcrdma_v2::draft07::header::HeaderType::ConnPropFinal, last);
            prop_assert!(matches!(r.receive(h), Step::Other(_)));
            theirs = theirs.apply(&h.properties().unwrap()).unwrap();
        }
        prop_assert_eq!(theirs, ours);
    }
}
