//! The HTTP target: raw bytes as what a client sends on one connection, through hyper's
//! HTTP/1.1 server parser and every function Luge applies to a request head — see
//! [`luge_server::fuzz_request_head`], which lives in the server so that those functions stay
//! private to it.

/// Serves `data` on an in-memory connection and checks each request head hyper parses.
pub fn run(data: &[u8]) {
    heads(data);
}

/// [`run`], returning how many request heads hyper parsed (for the tests).
pub fn heads(data: &[u8]) -> usize {
    luge_server::fuzz_request_head(data)
}
