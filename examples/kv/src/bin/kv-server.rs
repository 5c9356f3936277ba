//! KV's server: `kv-server [ADDRESS]` listens over TCP (default 127.0.0.1:0, any free port),
//! prints the address it listens on, and serves until its standard input closes.

use std::io::Read;
use std::sync::Arc;

use kv::{kv_v1, Store};
use negotiate::server::{Server, ServerConfig};
use negotiate::service::{Bindings, Services};
use rpcrdma_verbs::Tcp;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:0".into());
    let binding = Arc::new(Bindings::new().with(kv_v1::Binding));
    let services = Services::new().with(kv_v1::Server(Store::default()));
    let server = Server::start(Tcp, addr.as_str(), ServerConfig::default(), binding, services)?;
    println!("{}", server.local_addr());
    // Serve until whoever started us closes our standard input.
    std::io::stdin().read_to_end(&mut Vec::new())?;
    Ok(())
}
