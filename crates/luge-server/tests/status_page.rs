//! The status page on the admin listener: the JSON snapshot counts exactly what the node served,
//! and the page itself, loaded in a real headless Chromium (`scripts/install-deps.sh` installs
//! Debian's `chromium`; `LUGE_CHROMIUM` names another binary), shows a function that was just
//! called and updates itself while it is called.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use luge_client::{CallOptions, HttpClient};
use luge_runtime::{FunctionConfig, RuntimeConfig};
use luge_server::{AdminConfig, AdminToken, HttpConfig, Node, NodeConfig, NodeFunction};
use serde_json::Value;

mod common;

/// With `+`, `/` and `=`, as a base64 token has (`docs/deploy.md` makes them so): the page
/// must send it as written, not form-decoded.
const TOKEN: &str = "status+page/test=token";

/// A node serving `echo` over HTTP, its admin listener behind [`TOKEN`].
fn node() -> Node {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    let admin = AdminConfig {
        addr: any,
        token: Some(AdminToken::new(TOKEN).unwrap()),
        ..Default::default()
    };
    let http = HttpConfig { addr: any, admin: Some(admin), ..HttpConfig::default() };
    let runtime = RuntimeConfig { workers: 1, ..RuntimeConfig::default() };
    let config = NodeConfig { runtime, http: Some(http), udp: None };
    let echo = NodeFunction {
        config: FunctionConfig::new("echo"),
        module: common::ECHO.as_bytes().to_vec(),
        route: "/echo".into(),
    };
    Node::start(config, &[echo]).unwrap()
}

fn admin(node: &Node) -> SocketAddr {
    node.http().unwrap().admin_addr().unwrap()
}

/// One `GET` over a fresh connection: status, head and body.
fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String, String) {
    let auth: Vec<String> =
        token.map(|t| format!("Authorization: Bearer {t}")).into_iter().collect();
    let answer = common::exchange(addr, "GET", path, &auth, "");
    (answer.status, answer.head, answer.body)
}

fn call_echo(client: &HttpClient, node: &Node) {
    let base = format!("http://{}", node.http_addr().unwrap());
    let answer = client.call(&base, "/echo", b"hi", CallOptions::default()).unwrap();
    assert!(answer.is_success(), "{answer:?}");
}

#[test]
fn the_status_snapshot_counts_what_was_served() {
    let node = node();
    let client = HttpClient::new().unwrap();
    for _ in 0..5 {
        call_echo(&client, &node);
    }
    // The data needs the token; the page (static, the same on every node) does not.
    assert_eq!(get(admin(&node), "/admin/status.json", None).0, 401);
    let (status, head, page) = get(admin(&node), "/admin/status", None);
    assert_eq!(status, 200, "{head}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(head.contains("content-security-policy: default-src 'none'"), "{head}");
    assert!(page.contains("fetch(\"status.json\""), "the page polls the snapshot");
    // Neither is served on the function listener.
    let functions = node.http_addr().unwrap();
    assert_eq!(get(functions, "/admin/status", Some(TOKEN)).0, 404);
    assert_eq!(get(functions, "/admin/status.json", Some(TOKEN)).0, 404);

    let (status, _, body) = get(admin(&node), "/admin/status.json", Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let s: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(s["node"]["health"], "ready", "{s}");
    assert_eq!(s["node"]["workers"], 1);
    assert_eq!(
        (&s["node"]["ull_threshold_us"], &s["node"]["ready_sandboxes"]),
        (&20.into(), &2.into())
    );
    assert!(s["uptime_ns"].as_u64().unwrap() > 0);
    let functions = s["functions"].as_array().unwrap();
    let echo = functions.iter().find(|f| f["name"] == "echo").expect("echo is listed");
    assert_eq!((&echo["kind"], &echo["tenant"]), (&Value::from("function"), &Value::from(0)));
    assert_eq!(echo["answered"], 5, "{echo}");
    assert_eq!(echo["outcomes"], serde_json::json!({ "ok": 5 }));
    assert_eq!((&echo["met"], &echo["in_flight"], &echo["ran"]), (&5.into(), &0.into(), &5.into()));
    let buckets = s["buckets"].as_array().unwrap().len();
    let latency = echo["latency"].as_array().unwrap();
    assert_eq!(latency.len(), buckets + 1, "one count per bucket and one above the last");
    assert_eq!(latency.iter().map(|n| n.as_u64().unwrap()).sum::<u64>(), 5);
    let (readiness, total) =
        (echo["readiness_ns"].as_u64().unwrap(), echo["ran_total_ns"].as_u64().unwrap());
    assert!(0 < readiness && readiness < total, "readiness {readiness} of {total} ns");
    let [worker] = &s["workers"].as_array().unwrap()[..] else { panic!("one worker: {s}") };
    assert!(worker["segments"].as_u64().unwrap() >= 5, "{worker}");
    assert!(worker["ready"].is_u64() && worker["ready_bytes"].is_u64(), "{worker}");
    assert!(worker["busy_ns"].as_u64().unwrap() > 0, "{worker}");
    assert_eq!(s["groups"][0]["queued"], 0);
    // The function listener's gauges: the status request, on the admin listener, is in neither
    // (0 once the client's keep-alive connection has closed).
    drop(client);
    let mut http = s["node"]["http"].clone();
    for _ in 0..200 {
        if http["connections"] == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        let body = get(admin(&node), "/admin/status.json", Some(TOKEN)).2;
        http = serde_json::from_str::<Value>(&body).unwrap()["node"]["http"].clone();
    }
    assert_eq!((&http["connections"], &http["in_flight"]), (&0.into(), &0.into()), "{http}");
    // The write and body bounds a client meets, as configured.
    assert_eq!(http["min_send_rate"], 1024, "{http}");
    assert_eq!(http["max_buffered_body_bytes"], 256 << 20, "{http}");
    assert_eq!(http["max_buffered_body_bytes_per_client"], 64 << 20, "{http}");
    assert_eq!(
        (&http["buffered_body_bytes"], &http["bodies_refused_per_client"]),
        (&0.into(), &0.into())
    );
    node.shutdown();
}

/// The browser: `LUGE_CHROMIUM`, else Debian's `chromium`.
fn chromium() -> String {
    let path = std::env::var("LUGE_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} not found: the status page is tested in a real browser; run scripts/setup.sh \
         (it installs Debian's chromium) or set LUGE_CHROMIUM"
    );
    path
}

#[test]
fn the_status_page_shows_a_function_just_called_and_updates() {
    let node = node();
    let client = HttpClient::new().unwrap();
    call_echo(&client, &node);
    // Keep calling while the browser polls, so successive snapshots differ.
    let stop = Arc::new(AtomicBool::new(false));
    let caller = {
        let (stop, base) = (Arc::clone(&stop), format!("http://{}", node.http_addr().unwrap()));
        std::thread::spawn(move || {
            let client = HttpClient::new().unwrap();
            while !stop.load(Ordering::Relaxed) {
                client.call(&base, "/echo", b"hi", CallOptions::default()).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let profile = std::env::temp_dir().join(format!("luge-chromium-{}", std::process::id()));
    let url = format!("http://{}/admin/status#token={TOKEN}", admin(&node));
    // Headless, with nothing that reaches beyond this machine; the virtual time budget lets the
    // page's timers run for 10 s of virtual time: ten polls, each waiting (in real time) for its
    // fetch, so that echo calls complete between the first and the last.
    let output = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            // A container's /dev/shm is often 64 MB, where chromium crashes; /tmp instead.
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=10000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(&url)
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    caller.join().unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    let dom = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let polls: u32 = attribute(&dom, "data-polls").parse().unwrap();
    assert!(polls >= 2, "the page polled {polls} times:\n{dom}");
    let echo = row(&dom, "data-name=\"echo\"");
    let answered: u64 = cell(echo, "answered").parse().unwrap();
    assert!(answered >= 1, "{echo}");
    // A rate is a difference between two snapshots: non-zero only if the page updated.
    let rate: f64 = cell(echo, "rate").parse().expect("a rate, not `–`");
    assert!(rate > 0.0, "{echo}");
    assert!(!cell(echo, "p99").starts_with('–'), "{echo}");
    let worker = row(&dom, "data-worker=\"0\"");
    assert!(cell(worker, "utilisation").ends_with('%'), "{worker}");
    assert!(cell(worker, "ready").ends_with("MiB)"), "{worker}");
    assert!(dom.contains(">sledgescale<"), "the node's policy is shown");
    node.shutdown();
}

/// The value of the first `name="…"` attribute in `dom`.
fn attribute<'a>(dom: &'a str, name: &str) -> &'a str {
    let start = dom.find(&format!("{name}=\"")).unwrap_or_else(|| panic!("no {name} in {dom}"));
    let rest = &dom[start + name.len() + 2..];
    &rest[..rest.find('"').unwrap()]
}

/// The table row opened with attribute `key`.
fn row<'a>(dom: &'a str, key: &str) -> &'a str {
    let start = dom.find(&format!("<tr {key}")).unwrap_or_else(|| panic!("no row {key} in {dom}"));
    let rest = &dom[start..];
    &rest[..rest.find("</tr>").unwrap()]
}

/// The text of the cell `data-k="key"` in `row`.
fn cell<'a>(row: &'a str, key: &str) -> &'a str {
    let start =
        row.find(&format!("data-k=\"{key}\"")).unwrap_or_else(|| panic!("no {key} in {row}"));
    let rest = &row[start..];
    let text = &rest[rest.find('>').unwrap() + 1..];
    text[..text.find('<').unwrap()].trim()
}
