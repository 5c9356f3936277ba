//! The transport-properties extension's receiver rules (specs/rpcrdma2-transport-properties.txt
//! sections 2.4 and 2.5), on hand-written bytes: each test names the section it checks.

use rpcrdma_v2::properties::{Exchange, Malformed, TransportProperties, RDMA2_PROPS_MAX, RDMA2_PROPVAL_MAX};

/// XDR words.
fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// An rpcrdma2_properties: `reply`, then each (id, value words) property.
fn properties(reply: bool, props: &[(u32, &[u32])]) -> Vec<u8> {
    let mut out = words(&[u32::from(reply), props.len() as u32]);
    for (id, value) in props {
        out.extend(words(&[*id, 4 * value.len() as u32]));
        out.extend(words(value));
    }
    out
}

#[test]
fn properties_2_2_request_and_reply_round_trip() {
    let all = TransportProperties {
        max_send_size: Some(65536),
        max_recv_size: Some(8192),
        remote_invalidation: Some(false),
        backward_credits: Some(3),
    };
    for kind in [Exchange::Request, Exchange::Reply] {
        for props in [all, TransportProperties::default()] {
            let mut buf = [0u8; 128];
            let n = props.encode(kind, &mut buf).unwrap();
            assert_eq!(TransportProperties::decode(&buf[..n]), Ok((kind, props)));
        }
    }
    // The wire form is the XDR of the document's section 3, property by property.
    let mut buf = [0u8; 128];
    let n = TransportProperties { max_recv_size: Some(8192), ..Default::default() }
        .encode(Exchange::Reply, &mut buf)
        .unwrap();
    assert_eq!(&buf[..n], properties(true, &[(2, &[8192])]));
}

#[test]
fn properties_2_4_a_property_with_an_unknown_identifier_is_ignored() {
    let bytes = properties(false, &[(99, &[1, 2, 3]), (2, &[16384])]);
    let (_, got) = TransportProperties::decode(&bytes).unwrap();
    assert_eq!(got, TransportProperties { max_recv_size: Some(16384), ..Default::default() });
}

#[test]
fn properties_2_4_a_value_that_does_not_decode_as_its_type_is_ignored() {
    // A two-word receive size, and a boolean that is neither 0 nor 1.
    let bytes = properties(false, &[(2, &[0, 16384]), (3, &[2]), (4, &[5])]);
    let (_, got) = TransportProperties::decode(&bytes).unwrap();
    assert_eq!(got, TransportProperties { backward_credits: Some(5), ..Default::default() });
}

#[test]
fn properties_2_4_only_the_first_occurrence_of_a_property_counts() {
    let bytes = properties(false, &[(3, &[1]), (3, &[0]), (1, &[4096]), (1, &[9999])]);
    let (_, got) = TransportProperties::decode(&bytes).unwrap();
    assert_eq!(got.remote_invalidation, Some(true));
    assert_eq!(got.max_send_size, Some(4096));
}

#[test]
fn properties_2_5_more_than_the_bound_of_properties_is_malformed() {
    let many: Vec<(u32, &[u32])> = (0..=RDMA2_PROPS_MAX).map(|i| (100 + i, &[][..])).collect();
    assert!(matches!(TransportProperties::decode(&properties(false, &many)), Err(Malformed::Xdr(_))));
    // At the bound itself it decodes.
    assert!(TransportProperties::decode(&properties(false, &many[1..])).is_ok());
}

#[test]
fn properties_2_5_a_value_longer_than_its_bound_is_malformed() {
    let long = vec![0u32; RDMA2_PROPVAL_MAX as usize / 4 + 1];
    assert!(matches!(TransportProperties::decode(&properties(false, &[(99, &long)])), Err(Malformed::Xdr(_))));
    let at_bound = vec![0u32; RDMA2_PROPVAL_MAX as usize / 4];
    assert!(TransportProperties::decode(&properties(false, &[(99, &at_bound)])).is_ok());
}

#[test]
fn properties_2_5_bytes_after_the_properties_are_malformed() {
    let mut bytes = properties(true, &[(2, &[8192])]);
    bytes.extend(words(&[0]));
    let end = bytes.len() - 4;
    assert_eq!(TransportProperties::decode(&bytes), Err(Malformed::TrailingBytes { end, extra: 4 }));
}

#[test]
fn properties_2_5_every_truncation_is_an_error_not_a_panic() {
    let bytes = properties(false, &[(1, &[4096]), (2, &[8192]), (3, &[1]), (4, &[2]), (77, &[1, 2])]);
    for len in 0..bytes.len() {
        assert!(TransportProperties::decode(&bytes[..len]).is_err(), "a truncation at {len} decoded");
    }
}
