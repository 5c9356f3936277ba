//! CALC's client: `calc-client ADDRESS` calls a calc-server over TCP and prints what it
//! answered; it exits non-zero if an answer is wrong.

use calc::{AddArgs, CalcName, GreetRes, BINDING, CALC_ADD, CALC_GREET, CALC_NULL, CALC_PROG, CALC_V1};
use negotiate::client::{Client, ClientConfig};
use negotiate::onc::{self, CallHeader, XidSource};
use rpcrdma_verbs::Tcp;
use xdr_spec_rt::Xdr;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args().nth(1).ok_or("usage: calc-client ADDRESS")?;
    let client = Client::connect(Tcp, addr.as_str(), ClientConfig::default())?;
    let xids = XidSource::seeded();

    // NULL: an empty result.
    let call = CallHeader::new(xids.next(), CALC_PROG, CALC_V1, CALC_NULL);
    let reply = client.call(&call.message(&[])?, &BINDING)?;
    assert!(onc::results(&reply, call.xid)?.is_empty());

    // ADD: the arguments encoded by the generated type, the result decoded as XDR hyper.
    let call = CallHeader::new(xids.next(), CALC_PROG, CALC_V1, CALC_ADD);
    let args = AddArgs { a: 40, b: 2 }.to_vec()?;
    let reply = client.call(&call.message(&args)?, &BINDING)?;
    let (sum, _) = i64::decode(onc::results(&reply, call.xid)?)?;
    println!("40 + 2 = {sum}");
    assert_eq!(sum, 42);

    // GREET: a string in, a struct out.
    let call = CallHeader::new(xids.next(), CALC_PROG, CALC_V1, CALC_GREET);
    let reply = client.call(&call.message(&CalcName("RDMA").to_vec()?)?, &BINDING)?;
    let (greeted, _) = GreetRes::decode(onc::results(&reply, call.xid)?)?;
    println!("{} (greeting number {})", greeted.greeting, greeted.times_greeted);
    assert_eq!(greeted.greeting, "hello, RDMA");

    println!("settled on RPC-over-RDMA version {:?}", client.version());
    Ok(())
}
