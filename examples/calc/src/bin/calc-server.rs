//! CALC's server: `calc-server [ADDRESS]` listens over TCP (default 127.0.0.1:0, any free
//! port), prints the address it listens on, and serves until its standard input closes.

use std::io::Read;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use calc::{AddArgs, CalcName, GreetRes, BINDING, CALC_ADD, CALC_GREET, CALC_NULL, CALC_PROG, CALC_V1};
use negotiate::onc::{self, CallHeader};
use negotiate::server::{Server, ServerConfig};
use rpcrdma_verbs::Tcp;
use xdr_spec_rt::Xdr;

/// Greetings made so far.
static GREETED: AtomicU32 = AtomicU32::new(0);

/// One call message in, one reply message out.
fn serve(call: &[u8]) -> Vec<u8> {
    let mut reply = Vec::new();
    let Ok((h, args_at)) = CallHeader::decode(call) else {
        return reply; // not an RPC call we can answer: the connection goes on without a reply
    };
    let args = &call[args_at..];
    match (h.prog, h.vers, h.proc) {
        (CALC_PROG, CALC_V1, CALC_NULL) => onc::reply_success(h.xid, &[], &mut reply),
        (CALC_PROG, CALC_V1, CALC_ADD) => match AddArgs::decode(args) {
            Ok((add, _)) => onc::reply_success(h.xid, &add.a.wrapping_add(add.b).to_be_bytes(), &mut reply),
            Err(_) => onc::reply_garbage_args(h.xid, &mut reply),
        },
        (CALC_PROG, CALC_V1, CALC_GREET) => match CalcName::decode(args) {
            // The generated decoder holds the name to its bound, CALC_MAX_NAME bytes.
            Ok((CalcName(name), _)) => {
                let greeting = format!("hello, {name}");
                let times_greeted = GREETED.fetch_add(1, Ordering::Relaxed) + 1;
                match (GreetRes { greeting: &greeting, times_greeted }).to_vec() {
                    Ok(results) => onc::reply_success(h.xid, &results, &mut reply),
                    Err(_) => onc::reply_system_err(h.xid, &mut reply),
                }
            }
            _ => onc::reply_garbage_args(h.xid, &mut reply),
        },
        (CALC_PROG, CALC_V1, _) => onc::reply_proc_unavail(h.xid, &mut reply),
        (CALC_PROG, _, _) => onc::reply_prog_mismatch(h.xid, CALC_V1, CALC_V1, &mut reply),
        _ => onc::reply_prog_unavail(h.xid, &mut reply),
    }
    reply
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:0".into());
    let server = Server::start(Tcp, addr.as_str(), ServerConfig::default(), Arc::new(BINDING), serve)?;
    println!("{}", server.local_addr());
    // Serve until whoever started us closes our standard input.
    std::io::stdin().read_to_end(&mut Vec::new())?;
    Ok(())
}
