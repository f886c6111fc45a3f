//! What the front-end tests share: the WAT functions they register, and how.

#![allow(dead_code)] // each test file uses a part

pub const NOOP: &str = include_str!("../../../../functions/builtin/noop.wat");
pub const ECHO: &str = include_str!("../../../../functions/builtin/echo.wat");
pub const HELLO: &str = include_str!("../../../../functions/builtin/hello.wat");
pub const FIB: &str = include_str!("../../../../functions/builtin/fib.wat");
pub const SPIN: &str = include_str!("../../../../functions/builtin/spin.wat");
pub const LOOP: &str = include_str!("../../../../functions/test/loop.wat");
pub const OOB: &str = include_str!("../../../../functions/test/oob.wat");
pub const EXIT3: &str = include_str!("../../../../functions/test/exit3.wat");
pub const MEMBOMB: &str = include_str!("../../../../functions/test/membomb.wat");
pub const ARGS: &str = include_str!("../../../../functions/test/args.wat");

/// `name` served from `wat` with generous limits (test machines are slow and shared: a 10 s
/// deadline and execution budget), in the uLL lane with `ull`.
pub fn function(name: &str, wat: &str, ull: bool) -> luge_server::NodeFunction {
    let mut config = luge_runtime::FunctionConfig::new(name);
    config.relative_deadline = std::time::Duration::from_secs(10);
    config.limits.max_execution = std::time::Duration::from_secs(10);
    config.ull = ull;
    luge_server::NodeFunction { config, module: wat.as_bytes().to_vec(), route: format!("/{name}") }
}

/// One answer read by [`exchange`]: the status code, the head (status line and headers) and the
/// body.
pub struct RawAnswer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl RawAnswer {
    /// The value of header `name` (case-insensitive), if present.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

/// One HTTP/1.1 request over a fresh connection (`Connection: close`), with `headers` (each
/// `Name: value`) and `body`, read to the end.
pub fn exchange(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[String],
    body: &str,
) -> RawAnswer {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    RawAnswer { status, head: head.to_owned(), body: body.to_owned() }
}
