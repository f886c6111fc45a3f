//! The HTTP clients against a fake HTTP/1.1 server on a raw `TcpListener`: the request line,
//! Luge's request headers and body arrive as specified, the response headers are parsed, and
//! keep-alive reuses one connection.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use luge_client::{AsyncHttpClient, CallOptions, ClientError, HttpClient};

/// What the fake server saw of one request.
#[derive(Debug)]
struct Seen {
    connection: usize,
    request_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Reads one request from `reader`; `None` at end of stream.
fn read_request(reader: &mut BufReader<TcpStream>, connection: usize) -> Option<Seen> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).ok()? == 0 {
        return None;
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let len = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some(Seen { connection, request_line: request_line.trim_end().to_owned(), headers, body })
}

/// A server answering `requests` requests (over however many connections) with a canned
/// response that echoes the body upper-cased; reports what it saw.
fn fake_server(requests: usize, respond: bool) -> (String, mpsc::Receiver<Seen>, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let mut answered = 0;
        for (connection, stream) in listener.incoming().enumerate() {
            let stream = stream.unwrap();
            let mut writer = stream.try_clone().unwrap();
            let mut reader = BufReader::new(stream);
            while let Some(seen) = read_request(&mut reader, connection) {
                let body = seen.body.to_ascii_uppercase();
                tx.send(seen).unwrap();
                if !respond {
                    std::thread::sleep(Duration::from_millis(300));
                    return;
                }
                let head = format!(
                    "HTTP/1.1 503 Service Unavailable\r\ncontent-length: {}\r\nluge-request-id: 77\r\n\
                     luge-execution-ns: 1500\r\nluge-queueing-ns: 2500\r\nluge-outcome: deadline_infeasible\r\n\
                     retry-after: 1\r\n\r\n",
                    body.len()
                );
                writer.write_all(head.as_bytes()).unwrap();
                writer.write_all(&body).unwrap();
                answered += 1;
                if answered == requests {
                    return;
                }
            }
        }
    });
    (base, rx, thread)
}

fn check_response(r: &luge_client::HttpResponse, body: &[u8]) {
    assert_eq!(r.status, 503);
    assert!(!r.is_success());
    assert_eq!(r.body, body);
    assert_eq!(r.request_id, Some(77));
    assert_eq!(r.execution, Some(Duration::from_nanos(1500)));
    assert_eq!(r.queueing, Some(Duration::from_nanos(2500)));
    assert_eq!(r.outcome.as_deref(), Some("deadline_infeasible"));
    assert_eq!(r.retry_after, Some(Duration::from_secs(1)));
}

#[test]
fn blocking_client_sends_luge_headers_and_reuses_its_connection() {
    let (base, seen, server) = fake_server(2, true);
    let client = HttpClient::new().unwrap();
    let opts = CallOptions::default()
        .with_deadline(Duration::from_millis(5))
        .with_expected(Duration::from_micros(100))
        .with_timeout(Duration::from_secs(5));
    let r = client.call(&base, "/echo", b"hi there", opts).unwrap();
    check_response(&r, b"HI THERE");
    let r = client.call(&format!("{base}/"), "echo", b"again", CallOptions::default()).unwrap();
    check_response(&r, b"AGAIN");
    server.join().unwrap();
    let first = seen.recv().unwrap();
    assert_eq!(first.request_line, "POST /echo HTTP/1.1");
    assert_eq!(first.header("luge-deadline-us"), Some("5000"));
    assert_eq!(first.header("luge-expected-us"), Some("100"));
    assert_eq!(first.body, b"hi there");
    let second = seen.recv().unwrap();
    assert_eq!(second.header("luge-deadline-us"), None);
    assert_eq!(second.body, b"again");
    assert_eq!(second.connection, first.connection, "keep-alive: one connection for both calls");
}

#[tokio::test]
async fn async_client_calls_and_times_out() {
    let (base, seen, server) = fake_server(1, true);
    let client = AsyncHttpClient::new();
    let r = client.call(&base, "f", b"abc", CallOptions::default()).await.unwrap();
    check_response(&r, b"ABC");
    assert_eq!(seen.recv().unwrap().request_line, "POST /f HTTP/1.1");
    server.join().unwrap();

    let (base, _seen, server) = fake_server(1, false);
    let opts = CallOptions::default().with_timeout(Duration::from_millis(50));
    let err = client.call(&base, "f", b"", opts).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { attempts: 1, .. }), "{err}");
    let err = client.call("ftp://x", "f", b"", opts).await.unwrap_err();
    assert!(matches!(err, ClientError::InvalidUrl { .. }), "{err}");
    server.join().unwrap();
}
