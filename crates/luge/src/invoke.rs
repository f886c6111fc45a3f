//! `luge invoke` and `luge functions`: a command-line client for a running server — call a
//! function over HTTP or UDP-RPC, and list, add or remove functions through the admin API.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use luge_client::{CallOptions, HttpClient, RpcClient};

/// `luge invoke` options.
#[derive(Debug, Args)]
pub struct InvokeArgs {
    /// Function name (or numeric id with `--rpc`).
    function: String,
    /// Request body.
    #[arg(long, short, conflicts_with = "file")]
    data: Option<String>,
    /// Read the request body from a file (`-` = stdin).
    #[arg(long, short)]
    file: Option<PathBuf>,
    /// Use UDP-RPC instead of HTTP.
    #[arg(long)]
    rpc: bool,
    /// Relative deadline in µs (default: the function's).
    #[arg(long)]
    deadline_us: Option<u64>,
    /// Server's HTTP base URL (also used to resolve names for `--rpc`).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Server's UDP-RPC address.
    #[arg(long, default_value = "127.0.0.1:8081")]
    rpc_addr: String,
    /// Give up after this many ms.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Print the request id and the server's timing on stderr.
    #[arg(long, short)]
    verbose: bool,
}

/// Runs `luge invoke`: prints the response body; fails with the server's reason otherwise.
pub fn invoke(args: InvokeArgs) -> Result<()> {
    let payload = match (&args.data, &args.file) {
        (Some(d), _) => d.clone().into_bytes(),
        (None, Some(p)) if p.as_os_str() == "-" => {
            let mut buf = Vec::new();
            std::io::stdin().read_to_end(&mut buf)?;
            buf
        }
        (None, Some(p)) => {
            std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?
        }
        (None, None) => Vec::new(),
    };
    let mut opts = CallOptions::default().with_timeout(Duration::from_millis(args.timeout_ms));
    if let Some(d) = args.deadline_us {
        opts = opts.with_deadline(Duration::from_micros(d));
    }
    let (ok, body, detail) = if args.rpc {
        let id = match args.function.parse::<u32>() {
            Ok(id) => id,
            Err(_) => function_id(&args.url, &args.function)?,
        };
        let addr =
            args.rpc_addr.to_socket_addrs()?.next().ok_or_else(|| anyhow!("bad --rpc-addr"))?;
        let mut client = RpcClient::connect(addr)?;
        let r =
            client.call(id, &payload, opts).with_context(|| format!("no answer from {addr}"))?;
        let detail = format!(
            "request {} status {} execution {:?} queueing {:?}{}",
            r.request_id,
            r.status,
            r.execution,
            r.queueing,
            if r.replayed { " (replayed)" } else { "" }
        );
        (r.is_ok(), r.payload, detail)
    } else {
        let route = if args.function.starts_with('/') {
            args.function.clone()
        } else {
            format!("/{}", args.function)
        };
        let client = HttpClient::new()?;
        let r = client
            .call(&args.url, &route, &payload, opts)
            .with_context(|| format!("no answer from {}", args.url))?;
        let detail = format!(
            "request {} HTTP {} outcome {} execution {:?} queueing {:?}",
            r.request_id.map_or("-".into(), |i| i.to_string()),
            r.status,
            r.outcome.as_deref().unwrap_or("-"),
            r.execution.unwrap_or_default(),
            r.queueing.unwrap_or_default()
        );
        (r.is_success(), r.body, detail)
    };
    if args.verbose {
        eprintln!("{detail}");
    }
    if !ok {
        bail!("{} ({detail})", String::from_utf8_lossy(&body).trim_end());
    }
    std::io::stdout().write_all(&body)?;
    Ok(())
}

/// `luge functions` verbs.
#[derive(Debug, Subcommand)]
pub enum FunctionsCommand {
    /// List the functions of a running server.
    List {
        /// Server's HTTP base URL.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
    },
    /// Register a module on a running server.
    Add {
        /// Function name.
        name: String,
        /// The module (`.wasm` or `.wat`).
        module: PathBuf,
        /// HTTP route (default `/NAME`).
        #[arg(long)]
        route: Option<String>,
        /// Relative deadline in µs.
        #[arg(long)]
        deadline_us: Option<u64>,
        /// Expected execution in µs.
        #[arg(long)]
        expected_us: Option<u64>,
        /// Server's HTTP base URL.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
    },
    /// Remove a function from a running server.
    Remove {
        /// Function name.
        name: String,
        /// Server's HTTP base URL.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
    },
}

/// Runs a `luge functions` verb.
pub fn functions(cmd: FunctionsCommand) -> Result<()> {
    match cmd {
        FunctionsCommand::List { url } => {
            let list = list(&url)?;
            println!(
                "{:>4}  {:<20} {:<24} {:>12} {:>12} {:>12}",
                "id", "name", "route", "deadline_us", "expected_us", "max_exec_us"
            );
            for f in list {
                let num = |k: &str| {
                    f.get(k).and_then(|v| v.as_u64()).map_or("-".into(), |v| v.to_string())
                };
                let text = |k: &str| f.get(k).and_then(|v| v.as_str()).unwrap_or("-").to_owned();
                println!(
                    "{:>4}  {:<20} {:<24} {:>12} {:>12} {:>12}",
                    num("id"),
                    text("name"),
                    text("route"),
                    num("relative_deadline_us"),
                    num("expected_execution_us"),
                    num("max_execution_us")
                );
            }
            Ok(())
        }
        FunctionsCommand::Add { name, module, route, deadline_us, expected_us, url } => {
            let body = std::fs::read(&module)
                .with_context(|| format!("cannot read {}", module.display()))?;
            let mut query = Vec::new();
            if let Some(r) = route {
                query.push(format!("route={r}"));
            }
            if let Some(d) = deadline_us {
                query.push(format!("deadline_us={d}"));
            }
            if let Some(e) = expected_us {
                query.push(format!("expected_us={e}"));
            }
            let q = if query.is_empty() { String::new() } else { format!("?{}", query.join("&")) };
            let (status, text) = admin(&url, "PUT", &format!("/admin/functions/{name}{q}"), &body)?;
            if !(200..300).contains(&status) {
                bail!("HTTP {status}: {}", text.trim_end());
            }
            println!("added {name}");
            Ok(())
        }
        FunctionsCommand::Remove { name, url } => {
            let (status, text) = admin(&url, "DELETE", &format!("/admin/functions/{name}"), &[])?;
            if !(200..300).contains(&status) {
                bail!("HTTP {status}: {}", text.trim_end());
            }
            println!("removed {name}");
            Ok(())
        }
    }
}

fn list(url: &str) -> Result<Vec<serde_json::Value>> {
    let (status, body) = admin(url, "GET", "/admin/functions", &[])?;
    if status != 200 {
        bail!("HTTP {status}: {}", body.trim_end());
    }
    match serde_json::from_str(&body).context("bad JSON from /admin/functions")? {
        serde_json::Value::Array(list) => Ok(list),
        _ => bail!("/admin/functions did not return a list"),
    }
}

/// The numeric id of function `name`, from the server's admin API (for `--rpc`).
fn function_id(url: &str, name: &str) -> Result<u32> {
    list(url)?
        .iter()
        .find(|f| f.get("name").and_then(|n| n.as_str()) == Some(name))
        .and_then(|f| f.get("id")?.as_u64())
        .and_then(|id| u32::try_from(id).ok())
        .ok_or_else(|| anyhow!("no function `{name}` on {url} (`luge functions list` shows them)"))
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`): status and body text.
fn admin(url: &str, method: &str, path: &str, body: &[u8]) -> Result<(u16, String)> {
    let host = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("only http:// URLs are supported, not `{url}`"))?
        .trim_end_matches('/');
    let addr: SocketAddr =
        host.to_socket_addrs()?.next().ok_or_else(|| anyhow!("cannot resolve `{host}`"))?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("cannot connect to {url}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response);
    let (head, rest) = text.split_once("\r\n\r\n").ok_or_else(|| anyhow!("bad HTTP response"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("bad HTTP status line"))?;
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    Ok((status, if chunked { dechunk(rest) } else { rest.to_owned() }))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}
