//! A TCP proxy that stalls or cuts the connections through it on command,
//! as Toxiproxy does: storage and broker faults are tested against the
//! real servers, not mocks. A process under test is pointed at
//! [`FaultProxy::address`] instead of the server.
//!
//! * [`FaultProxy::stall`]: bytes keep being read from both sides but are
//!   held, not passed on, until [`FaultProxy::resume`] — a request in
//!   flight hangs as it does on a congested or partitioned network, and
//!   [`FaultProxy::held`] tells the test that one really was in flight.
//! * [`FaultProxy::cut`]: every open connection is closed at once (new
//!   ones are still accepted).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// A running proxy; stops accepting and closes its connections when
/// dropped.
pub struct FaultProxy {
    address: SocketAddr,
    shared: Arc<Shared>,
}

/// What the accepting thread and the pumps share.
struct Shared {
    upstream: SocketAddr,
    /// Whether bytes are held instead of passed on.
    stalled: Mutex<bool>,
    resumed: Condvar,
    /// Reads held by stalls.
    held: AtomicU64,
    /// Bytes passed on.
    forwarded: AtomicU64,
    /// Both ends of every open connection (for [`FaultProxy::cut`]).
    open: Mutex<Vec<TcpStream>>,
    stopping: AtomicBool,
}

impl FaultProxy {
    /// Listen on a free local port and forward each connection to
    /// `upstream`.
    pub fn start(upstream: impl ToSocketAddrs) -> io::Result<FaultProxy> {
        let upstream = upstream
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no upstream address"))?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            stalled: Mutex::new(false),
            resumed: Condvar::new(),
            held: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            open: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
        });
        let accepting = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(format!("fault proxy {address}"))
            .spawn(move || accept(&listener, &accepting))?;
        Ok(FaultProxy { address, shared })
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://<address>`: an endpoint URL for HTTP clients.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Hold every byte read from now on, in both directions.
    pub fn stall(&self) {
        *self.shared.stalled.lock().unwrap_or_else(PoisonError::into_inner) = true;
    }

    /// Pass bytes on again, the held ones first.
    pub fn resume(&self) {
        *self.shared.stalled.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.shared.resumed.notify_all();
    }

    /// Close every open connection.
    pub fn cut(&self) {
        for stream in self.shared.open.lock().unwrap_or_else(PoisonError::into_inner).drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// How many reads stalls have held so far (one per chunk).
    pub fn held(&self) -> u64 {
        self.shared.held.load(Ordering::SeqCst)
    }

    /// Bytes passed on so far, both directions.
    pub fn forwarded(&self) -> u64 {
        self.shared.forwarded.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.resume();
        self.cut();
        // Wake the accepting thread so it sees it is stopping.
        let _ = TcpStream::connect(self.address);
    }
}

/// Accept connections until stopping, each pumped by two threads.
fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let Ok(server) = TcpStream::connect(shared.upstream) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let ends = (client.try_clone(), server.try_clone(), client.try_clone(), server.try_clone());
        let (Ok(client_in), Ok(server_out), Ok(client_kept), Ok(server_kept)) = ends else {
            continue;
        };
        shared
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend([client_kept, server_kept]);
        for (from, to) in [(client_in, server_out), (server, client)] {
            let shared = Arc::clone(shared);
            std::thread::spawn(move || pump(from, to, &shared));
        }
    }
}

/// Copy `from` to `to` until either closes, holding bytes while stalled.
fn pump(mut from: TcpStream, mut to: TcpStream, shared: &Shared) {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let mut stalled = shared.stalled.lock().unwrap_or_else(PoisonError::into_inner);
        if *stalled {
            shared.held.fetch_add(1, Ordering::SeqCst);
        }
        while *stalled {
            stalled = shared.resumed.wait(stalled).unwrap_or_else(PoisonError::into_inner);
        }
        drop(stalled);
        if to.write_all(&buffer[..read]).is_err() {
            break;
        }
        shared.forwarded.fetch_add(read as u64, Ordering::SeqCst);
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A server echoing what each connection sends.
    fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut writer = stream.try_clone().unwrap();
                    let _ = io::copy(&mut &stream, &mut writer);
                });
            }
        });
        address
    }

    fn round_trip(stream: &mut TcpStream, bytes: &[u8]) -> io::Result<Vec<u8>> {
        stream.write_all(bytes)?;
        let mut back = vec![0; bytes.len()];
        stream.read_exact(&mut back)?;
        Ok(back)
    }

    #[test]
    fn passes_stalls_resumes_and_cuts() {
        let proxy = FaultProxy::start(echo()).unwrap();
        let mut stream = TcpStream::connect(proxy.address()).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        assert_eq!(round_trip(&mut stream, b"one").unwrap(), b"one");

        proxy.stall();
        let stalled = round_trip(&mut stream, b"two");
        assert!(stalled.is_err(), "nothing comes back while stalled: {stalled:?}");
        assert_eq!(proxy.held(), 1, "the request was in flight and held");
        proxy.resume();
        let mut back = vec![0; 3];
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.read_exact(&mut back).unwrap();
        assert_eq!(back, b"two", "held bytes pass on after the stall");

        proxy.cut();
        let mut rest = Vec::new();
        let after_cut = stream.read_to_end(&mut rest);
        assert!(matches!(after_cut, Ok(0) | Err(_)), "closed: {after_cut:?} {rest:?}");
        let mut again = TcpStream::connect(proxy.address()).unwrap();
        assert_eq!(round_trip(&mut again, b"new").unwrap(), b"new", "new connections work");
        assert!(proxy.forwarded() >= 12, "counted: {}", proxy.forwarded());
    }
}
