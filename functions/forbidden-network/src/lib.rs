//! A key function that reaches for the network, which no Weir pipeline
//! grants: the host must refuse to load it.
//!
//! Besides the Weir interfaces, its component imports WASI 0.2 sockets
//! (`wasi:sockets/instance-network@0.2.12` and
//! `wasi:sockets/tcp-create-socket@0.2.12`, with the interfaces they
//! depend on; see `wit/world.wit`), and [`KeyFunction::key`] really calls
//! them: it takes the default network and creates an IPv4 TCP socket,
//! then drops both, on every event.
//!
//! Input: any bytes. Key: the event's value bytes, unchanged (whatever the
//! socket calls return). Natively (`cargo test`) the socket calls are left
//! out, since there is no component to import them.

use weir_sdk::{function, Error, Event, KeyFunction};

/// Bindings to the WASI sockets imports (Wasm only).
#[cfg(target_arch = "wasm32")]
#[allow(missing_docs, unsafe_code, clippy::all)]
mod wasi_sockets {
    wit_bindgen::generate!({
        path: "wit",
        world: "weir-test:forbidden-network/network-client",
        generate_all,
    });
}

/// The function: keys each event by its value, after touching the network.
#[derive(Default)]
pub struct ForbiddenNetwork;

#[function]
impl KeyFunction for ForbiddenNetwork {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        reach_for_the_network();
        Ok(event.value.clone())
    }
}

/// Take the default network and create a TCP socket (dropping both).
#[cfg(target_arch = "wasm32")]
fn reach_for_the_network() {
    use wasi_sockets::wasi::sockets::{
        instance_network, network::IpAddressFamily, tcp_create_socket,
    };
    let network = instance_network::instance_network();
    let socket = tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4);
    drop((socket, network));
}

/// Natively there is no network import to call.
#[cfg(not(target_arch = "wasm32"))]
fn reach_for_the_network() {}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    #[test]
    fn keys_by_the_event_value() {
        let mut harness = Harness::<ForbiddenNetwork>::new();
        assert_eq!(harness.key(&Event::new(b"c1".to_vec(), 0)).unwrap(), b"c1");
        assert_eq!(harness.key(&Event::new(Vec::new(), 0)).unwrap(), b"");
    }
}
