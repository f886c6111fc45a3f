//! What the `luge` binary's integration tests share: a `luge serve` on ephemeral ports.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // each test file uses a part

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub const LUGE: &str = env!("CARGO_BIN_EXE_luge");

/// A `luge serve` on ephemeral ports, stopped with SIGTERM when dropped.
pub struct Server {
    child: Option<Child>,
    /// `http://IP:PORT`.
    pub http: String,
    /// `IP:PORT` of UDP-RPC.
    pub rpc: String,
    /// `http://IP:PORT` of the admin API.
    pub admin: String,
}

impl Server {
    /// Starts `luge serve` with `extra` arguments and its AoT cache under `cache`, and reads
    /// the addresses from its banner.
    pub fn start(extra: &[&str], cache: &Path) -> Self {
        Self::spawn(extra, cache, "error", Stdio::inherit())
    }

    /// As [`start`](Self::start), logging at `log` (a `RUST_LOG` filter) into a pipe that
    /// [`stop_with_log`](Self::stop_with_log) reads.
    pub fn start_logging(extra: &[&str], cache: &Path, log: &str) -> Self {
        Self::spawn(extra, cache, log, Stdio::piped())
    }

    /// As [`start_logging`](Self::start_logging), with `configure` applied to the command
    /// first (say, limits set in the child before it runs `luge`).
    pub fn start_configured(
        extra: &[&str],
        cache: &Path,
        log: &str,
        configure: impl FnOnce(&mut Command),
    ) -> Self {
        Self::spawn_with(extra, cache, log, Stdio::piped(), configure)
    }

    fn spawn(extra: &[&str], cache: &Path, log: &str, stderr: Stdio) -> Self {
        Self::spawn_with(extra, cache, log, stderr, |_| {})
    }

    fn spawn_with(
        extra: &[&str],
        cache: &Path,
        log: &str,
        stderr: Stdio,
        configure: impl FnOnce(&mut Command),
    ) -> Self {
        let mut command = Command::new(LUGE);
        command
            .args(["serve", "--http", "127.0.0.1:0", "--rpc", "127.0.0.1:0"])
            .args(if extra.contains(&"--admin") { &[][..] } else { &["--admin", "127.0.0.1:0"] })
            .args(extra)
            .env("RUST_LOG", log)
            .env("XDG_CACHE_HOME", cache)
            .stdout(Stdio::piped())
            .stderr(stderr);
        configure(&mut command);
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (mut http, mut rpc, mut admin) = (None, None, None);
        while http.is_none() || rpc.is_none() || admin.is_none() {
            let line = lines.next().expect("banner ended early").unwrap();
            if let Some(rest) = line.trim().strip_prefix("HTTP") {
                let url = rest.split_whitespace().next().unwrap();
                http = Some(url.trim_end_matches("/<route>").to_owned());
            } else if let Some(rest) = line.trim().strip_prefix("UDP-RPC") {
                rpc = Some(rest.trim().to_owned());
            } else if let Some(rest) = line.trim().strip_prefix("admin") {
                admin = Some(rest.trim().trim_end_matches("/admin/functions").to_owned());
            }
        }
        // Keep draining the banner so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self { child: Some(child), http: http.unwrap(), rpc: rpc.unwrap(), admin: admin.unwrap() }
    }

    /// `luge invoke` against this server.
    pub fn invoke(&self, args: &[&str]) -> std::process::Output {
        Command::new(LUGE)
            .arg("invoke")
            .args(args)
            .args(["--url", &self.http, "--rpc-addr", &self.rpc, "--admin", &self.admin])
            .output()
            .unwrap()
    }

    /// Sends SIGTERM, waits for the exit and returns what it logged (started with
    /// [`start_logging`](Self::start_logging)).
    pub fn stop_with_log(mut self) -> String {
        let mut child = self.child.take().unwrap();
        terminate(&child);
        let mut log = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut log).unwrap();
        child.wait().unwrap();
        log
    }

    /// Waits (at most `within`) for the server to exit on its own: its exit code and what it
    /// logged (started with [`start_logging`](Self::start_logging)).
    pub fn wait_for_exit(mut self, within: Duration) -> (i32, String) {
        let mut child = self.child.take().unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > within {
                terminate(&child);
                panic!("the server did not exit within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut log = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut log).unwrap();
        (status.code().unwrap_or(-1), log)
    }

    /// Sends SIGTERM without waiting.
    pub fn signal(&self) {
        terminate(self.child.as_ref().unwrap());
    }

    /// Sends `signal` without waiting.
    pub fn send(&self, signal: libc::c_int) {
        let pid = self.child.as_ref().unwrap().id() as libc::pid_t;
        // SAFETY: kill(2) on the pid of our own child process.
        unsafe { libc::kill(pid, signal) };
    }

    /// Sends SIGTERM and waits (at most 20 s) for the exit code.
    pub fn stop(mut self) -> i32 {
        let mut child = self.child.take().unwrap();
        terminate(&child);
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(start.elapsed() < Duration::from_secs(20), "server did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        terminate(&child);
        let start = Instant::now();
        while child.try_wait().ok().flatten().is_none() && start.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Sends SIGTERM to `child` without waiting.
pub fn terminate(child: &Child) {
    // SAFETY: kill(2) on the pid of our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
}
