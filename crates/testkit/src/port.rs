//! Loopback ports for the servers a test starts.

use std::net::TcpListener;

/// A port free on 127.0.0.1 at the time of the call (the OS picks it; the listener is closed
/// again, so whoever binds it next must do so soon).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free loopback port")
}
