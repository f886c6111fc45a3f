//! `luge invoke` and `luge functions`: a command-line client for a running server — call a
//! function over HTTP or UDP-RPC, and list, add or remove functions through the admin API.

use std::io::{Read, Write};
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use luge_client::{AddOptions, AdminClient, CallOptions, HttpClient, RpcClient};

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
    /// Relative deadline in µs (default, or 0: the function's).
    #[arg(long)]
    deadline_us: Option<u64>,
    /// Server's HTTP base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The admin API that resolves names for `--rpc` (token: `LUGE_ADMIN_TOKEN`).
    #[arg(long, default_value = ADMIN_URL)]
    admin: String,
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
    // 0 means the function's own deadline, as on the wire (sending it would ask for 1 µs).
    if let Some(d) = args.deadline_us.filter(|&d| d > 0) {
        opts = opts.with_deadline(Duration::from_micros(d));
    }
    let (ok, body, detail) = if args.rpc {
        let id = match args.function.parse::<u32>() {
            Ok(id) => id,
            Err(_) => function_id(&args.admin, &args.function)?,
        };
        let addr =
            args.rpc_addr.to_socket_addrs()?.next().ok_or_else(|| anyhow!("bad --rpc-addr"))?;
        let mut client = RpcClient::connect(addr)?;
        // Verbose: a chain's per-stage times too, as HTTP's `Luge-Stages` gives them.
        let opts = if args.verbose { opts.with_stages() } else { opts };
        let r =
            client.call(id, &payload, opts).with_context(|| format!("no answer from {addr}"))?;
        let stages: Vec<String> = r
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{i};q={};e={}", s.queueing_ns, s.execution_ns))
            .collect();
        let detail = format!(
            "request {} status {} execution {:?} queueing {:?}{}{}",
            r.request_id,
            r.status,
            r.execution,
            r.queueing,
            if r.replayed { " (replayed)" } else { "" },
            if stages.is_empty() {
                String::new()
            } else {
                format!(" stages {}", stages.join(", "))
            }
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
            "request {} HTTP {} outcome {} execution {:?} queueing {:?}{}",
            r.request_id.map_or("-".into(), |i| i.to_string()),
            r.status,
            r.outcome.as_deref().unwrap_or("-"),
            r.execution.unwrap_or_default(),
            r.queueing.unwrap_or_default(),
            r.stages
                .as_deref()
                .filter(|s| !s.is_empty())
                .map_or(String::new(), |s| format!(" stages {s}"))
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

/// The admin API's default URL: `luge serve`'s admin listener.
pub(crate) const ADMIN_URL: &str = "http://127.0.0.1:8082";

/// Where the admin API is and how to authenticate to it.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// The node's admin API (its admin listener, not the function port).
    #[arg(long, default_value = ADMIN_URL)]
    url: String,
    /// File holding the admin bearer token (`LUGE_ADMIN_TOKEN` takes precedence).
    #[arg(long)]
    token_file: Option<PathBuf>,
}

impl AdminArgs {
    fn client(&self) -> Result<AdminClient> {
        admin_client(&self.url, self.token_file.as_deref())
    }
}

/// A client of the admin API at `url`, with the token of `LUGE_ADMIN_TOKEN` or `token_file`.
pub(crate) fn admin_client(url: &str, token_file: Option<&std::path::Path>) -> Result<AdminClient> {
    let client = AdminClient::new(url)?;
    let token = match (std::env::var("LUGE_ADMIN_TOKEN"), token_file) {
        (Ok(token), _) if !token.trim().is_empty() => token,
        (_, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the admin token file {}", path.display()))?,
        (_, None) => return Ok(client),
    };
    Ok(client.with_token(&token))
}

/// `luge functions` verbs.
#[derive(Debug, Subcommand)]
pub enum FunctionsCommand {
    /// List the functions of a running server.
    List {
        #[command(flatten)]
        admin: AdminArgs,
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
        /// What becomes of a request that can no longer meet its deadline: `kill` (answered at
        /// once, the default) or `demote` (run late when a worker has nothing on time).
        #[arg(long)]
        on_overrun: Option<String>,
        /// Its tenant (default 0).
        #[arg(long)]
        tenant: Option<u32>,
        /// `ull` (ultra-low-latency: the uLL lane) or `standard` (the default).
        #[arg(long, value_parser = ["ull", "standard"])]
        class: Option<String>,
        /// Execution budget per request in µs (CPU time).
        #[arg(long)]
        max_execution_us: Option<u64>,
        /// Linear memory per sandbox (at most the node's `max_memory_bytes`).
        #[arg(long)]
        max_memory_bytes: Option<u64>,
        /// Largest request body (default 1 MiB).
        #[arg(long)]
        max_request_bytes: Option<u64>,
        /// Largest response (default 1 MiB).
        #[arg(long)]
        max_output_bytes: Option<u64>,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Remove a function from a running server.
    Remove {
        /// Function name.
        name: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
}

/// Runs a `luge functions` verb.
pub fn functions(cmd: FunctionsCommand) -> Result<()> {
    match cmd {
        FunctionsCommand::List { admin } => {
            let url = &admin.url;
            let list = admin.client()?.list().with_context(|| format!("listing {url}"))?;
            println!(
                "{:>4}  {:<20} {:<24} {:>12} {:>12} {:>12}",
                "id", "name", "route", "deadline_us", "expected_us", "max_exec_us"
            );
            for f in list {
                println!(
                    "{:>4}  {:<20} {:<24} {:>12} {:>12} {:>12}",
                    f.id,
                    f.name,
                    f.route,
                    f.relative_deadline_us,
                    f.expected_execution_us.map_or("-".into(), |v| v.to_string()),
                    f.max_execution_us
                );
            }
            Ok(())
        }
        FunctionsCommand::Add {
            name,
            module,
            route,
            deadline_us,
            expected_us,
            on_overrun,
            tenant,
            class,
            max_execution_us,
            max_memory_bytes,
            max_request_bytes,
            max_output_bytes,
            admin,
        } => {
            let body = std::fs::read(&module)
                .with_context(|| format!("cannot read {}", module.display()))?;
            let options = AddOptions {
                route,
                deadline: deadline_us.map(Duration::from_micros),
                expected: expected_us.map(Duration::from_micros),
                on_overrun,
                tenant,
                ull: class.map(|c| c == "ull"),
                max_execution: max_execution_us.map(Duration::from_micros),
                max_memory_bytes,
                max_request_bytes,
                max_output_bytes,
            };
            admin.client()?.add(&name, &body, &options)?;
            println!("added {name}");
            Ok(())
        }
        FunctionsCommand::Remove { name, admin } => {
            admin.client()?.remove(&name)?;
            println!("removed {name}");
            Ok(())
        }
    }
}

/// The numeric id of function `name`, from the server's admin API (for `--rpc`).
pub(crate) fn function_id(url: &str, name: &str) -> Result<u32> {
    admin_client(url, None)?.id_of(name).with_context(|| {
        format!("no function `{name}` on {url} (`luge functions list` shows them)")
    })
}
