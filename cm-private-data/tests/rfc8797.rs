//! RFC 8797's rules, one test each, and property tests.

use cm_private_data::*;
use proptest::prelude::*;

#[test]
fn encodes_the_section_4_layout() {
    let pd = PrivateData::new(Flags::REMOTE_INVALIDATE, 4096, 4096);
    // The Linux 6.1 client's bytes (docs/design.md).
    assert_eq!(pd.encode(), [0xf6, 0xab, 0x0e, 0x18, 0x01, 0x01, 0x03, 0x03]);
    assert_eq!(PrivateData::new(Flags::empty(), 1024, 262_144).encode()[4..], [1, 0, 0, 255]);
}

#[test]
fn sizes_are_bytes_over_1024_minus_one_rfc8797_4_2() {
    assert_eq!((encode_size(1024), encode_size(2048), encode_size(262_144)), (0, 1, 255));
    assert_eq!((decode_size(0), decode_size(3), decode_size(255)), (1024, 4096, 262_144));
    // Sizes the field cannot say are rounded down (never over-advertised)
    // and clamped to 1024..=262144.
    assert_eq!((encode_size(1500), encode_size(100), encode_size(u32::MAX)), (0, 0, 255));
}

#[test]
fn reserved_bits_are_sent_zero_and_ignored_on_receipt_rfc8797_4() {
    let pd = PrivateData::new(Flags::from_bits_retain(0xff), 1024, 1024);
    assert_eq!(pd.encode()[5], 0x01, "senders MUST set the reserved bits to zero");
    let received = [0xf6, 0xab, 0x0e, 0x18, 1, 0xfe, 0, 0];
    let got = PrivateData::decode(&received).unwrap();
    assert_eq!(got.flags(), Flags::empty(), "receivers MUST ignore them");
}

#[test]
fn absent_or_invalid_private_data_means_defaults_rfc8797_5_1() {
    for bad in [
        &[][..],
        &[0u8; 56][..],
        &[0xf6, 0xab, 0x0e, 0x18, 2, 1, 3, 3][..],
        &[0xf6, 0xab, 0x0e, 0x18, 1, 1, 3][..],
        &[0x18, 0x0e, 0xab, 0xf6, 1, 1, 3, 3][..],
    ] {
        let pd = PrivateData::from_received(bad);
        assert_eq!((pd.flags(), pd.send_size(), pd.receive_size()), (Flags::empty(), 1024, 1024), "{bad:?}");
    }
}

#[test]
fn format_identifier_is_found_at_any_offset_and_alignment_rfc8797_5_2() {
    let msg = PrivateData::new(Flags::REMOTE_INVALIDATE, 8192, 16384).encode();
    for offset in 0..=48 {
        let mut buf = [0x5au8; 56];
        buf[offset..offset + 8].copy_from_slice(&msg);
        assert_eq!(PrivateData::find(&buf).map(|p| p.send_size()), Some(8192), "offset {offset}");
    }
    // Too close to the end: the content would overrun the buffer.
    let mut buf = [0u8; 56];
    buf[50..54].copy_from_slice(&FORMAT_IDENTIFIER.to_be_bytes());
    assert_eq!(PrivateData::find(&buf), None);
    // An earlier occurrence with a bad version is skipped, a later valid one used.
    let mut buf = vec![0xf6, 0xab, 0x0e, 0x18, 9, 0, 0, 0];
    buf.extend_from_slice(&msg);
    assert_eq!(PrivateData::find(&buf).map(|p| p.receive_size()), Some(16384));
}

#[test]
fn thresholds_take_the_smaller_side_rfc8797_4_2() {
    let client = PrivateData::new(Flags::empty(), 4096, 8192);
    let server = PrivateData::new(Flags::empty(), 16384, 2048);
    let n = negotiate(&client, &server);
    assert_eq!((n.client_to_server, n.server_to_client), (2048, 8192));
    let none = negotiate(&PrivateData::default(), &server);
    assert_eq!((none.client_to_server, none.server_to_client), (1024, 1024));
}

#[test]
fn send_with_invalidate_needs_both_r_flags_rfc8797_4_1() {
    let r = PrivateData::new(Flags::REMOTE_INVALIDATE, 1024, 1024);
    let no = PrivateData::new(Flags::empty(), 1024, 1024);
    assert!(negotiate(&r, &r).remote_invalidation);
    assert!(!negotiate(&r, &no).remote_invalidation);
    assert!(!negotiate(&no, &r).remote_invalidation);
    assert_eq!(reply_invalidate_rkey(&negotiate(&r, &no), [5]), None, "MUST use only RDMA Send");
}

proptest! {
    #[test]
    fn encode_decode_round_trips(r in any::<bool>(), send in 0u32..400_000, recv in 0u32..400_000) {
        let flags = if r { Flags::REMOTE_INVALIDATE } else { Flags::empty() };
        let pd = PrivateData::new(flags, send, recv);
        prop_assert_eq!(PrivateData::decode(&pd.encode()), Some(pd));
        prop_assert!(pd.send_size().is_multiple_of(1024) && (MIN_INLINE..=MAX_INLINE).contains(&pd.send_size()));
        prop_assert!(pd.send_size() <= send.max(MIN_INLINE));
    }

    #[test]
    fn found_wherever_it_is_put(prefix in prop::collection::vec(0u8..0xf0, 0..100), tail in 0usize..50, rs in any::<u8>()) {
        // The prefix holds no 0xf6, so the only Format Identifier is ours.
        let pd = PrivateData::new(Flags::REMOTE_INVALIDATE, u32::from(rs) * 1024 + 1024, 2048);
        let mut buf = prefix;
        buf.extend_from_slice(&pd.encode());
        buf.resize(buf.len() + tail, 0);
        prop_assert_eq!(PrivateData::find(&buf), Some(pd));
    }

    #[test]
    fn never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let pd = PrivateData::from_received(&bytes);
        prop_assert!((MIN_INLINE..=MAX_INLINE).contains(&pd.receive_size()));
    }
}
