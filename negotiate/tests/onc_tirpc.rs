//! `negotiate::onc` against libtirpc, the ONC RPC reference implementation: the same call
//! headers (AUTH_NONE, AUTH_SYS) and every reply kind are encoded by libtirpc's
//! `xdr_callmsg`/`xdr_replymsg`/`xdr_authunix_parms` (`tests/onc_tirpc_oracle.c`, built here
//! with `cc -ltirpc`) and by the helpers, and must be the same bytes; the helpers' decoders
//! read libtirpc's bytes back. Without a C compiler or libtirpc's headers this test prints a
//! SKIP line and passes, except under `CI=true`, where a missing oracle fails (.ci/run
//! installs libtirpc-dev and a C compiler).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use negotiate::onc::{self, AcceptStat, Auth, AuthStat, AuthSys, CallHeader, Rejected, Reply, ReplyHeader};

/// libtirpc's encodings by name, or why there are none.
fn oracle() -> Result<HashMap<String, Vec<u8>>, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/onc_tirpc_oracle.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("onc_tirpc_oracle");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-I/usr/include/tirpc", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-ltirpc")
        .output()
        .map_err(|e| format!("{cc}: {e}"))?;
    if !built.status.success() {
        return Err(format!("{cc} -ltirpc failed: {}", String::from_utf8_lossy(&built.stderr)));
    }
    let run = Command::new(&exe).output().map_err(|e| format!("{}: {e}", exe.display()))?;
    assert!(run.status.success(), "the oracle failed: {}", String::from_utf8_lossy(&run.stderr));
    let text = String::from_utf8(run.stdout).unwrap();
    Ok(text
        .lines()
        .map(|l| {
            let (name, hex) = l.split_once(' ').unwrap();
            let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            (name.to_owned(), bytes)
        })
        .collect())
}

#[test]
fn helpers_encode_and_decode_as_libtirpc_does() {
    let theirs = match oracle() {
        Ok(t) => t,
        Err(why) => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true");
            assert!(
                !ci,
                "no libtirpc oracle ({why})\n(CI=true: the oracles must be installed; .ci/run installs libtirpc-dev)"
            );
            eprintln!("SKIP: no libtirpc oracle ({why})");
            return;
        }
    };
    let get = |name: &str| theirs.get(name).unwrap_or_else(|| panic!("the oracle printed no {name}: {theirs:?}"));

    let none = CallHeader::new(0x0102_0304, 100_003, 4, 1);
    let sys = none.clone().with_cred(Auth::Sys(AuthSys {
        stamp: 0x5eed,
        machine_name: "rpcrdma-rs".into(),
        uid: 1000,
        gid: 100,
        gids: vec![100, 10],
    }));
    for (name, h) in [("call_none", none), ("call_sys", sys)] {
        assert_eq!(&h.message(&[]).unwrap(), get(name), "{name}");
        assert_eq!(CallHeader::decode(get(name)).unwrap(), (h, get(name).len()), "{name}");
    }

    let xid = 0xfeed_face;
    let accepted = |stat| Reply::Accepted { verf: Auth::None, stat };
    type Build = fn(u32, &mut Vec<u8>);
    let cases: [(&str, Build, Reply); 8] = [
        ("success_42", |x, o| onc::reply_success(x, &42u32.to_be_bytes(), o), accepted(AcceptStat::Success)),
        ("prog_unavail", onc::reply_prog_unavail, accepted(AcceptStat::ProgUnavail)),
        (
            "prog_mismatch_2_4",
            |x, o| onc::reply_prog_mismatch(x, 2, 4, o),
            accepted(AcceptStat::ProgMismatch { low: 2, high: 4 }),
        ),
        ("proc_unavail", onc::reply_proc_unavail, accepted(AcceptStat::ProcUnavail)),
        ("garbage_args", onc::reply_garbage_args, accepted(AcceptStat::GarbageArgs)),
        ("system_err", onc::reply_system_err, accepted(AcceptStat::SystemErr)),
        (
            "rpc_mismatch_2_2",
            |x, o| onc::reply_rpc_mismatch(x, 2, 2, o),
            Reply::Denied(Rejected::RpcMismatch { low: 2, high: 2 }),
        ),
        (
            "auth_error_tooweak",
            |x, o| onc::reply_auth_error(x, AuthStat::TOOWEAK, o),
            Reply::Denied(Rejected::AuthError(AuthStat::TOOWEAK)),
        ),
    ];
    for (name, build, reply) in cases {
        let mut ours = Vec::new();
        build(xid, &mut ours);
        assert_eq!(&ours, get(name), "{name}");
        let (h, at) = ReplyHeader::decode(get(name)).unwrap();
        assert_eq!(h, ReplyHeader { xid, reply }, "{name}");
        let results: &[u8] = if name == "success_42" { &[0, 0, 0, 42] } else { &[] };
        assert_eq!(&get(name)[at..], results, "{name}");
    }
}
