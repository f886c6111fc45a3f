//! What a `wrk --latency` report says, read into a [`WrkRun`]: the `peers` scenario's HTTP
//! figures come from wrk, run against every server alike.

use serde::Serialize;

/// What one wrk run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct WrkRun {
    /// Requests answered 2xx/3xx per second (a refusal or an error answered fast is not
    /// throughput: it would make a failing server look faster).
    pub rps: f64,
    /// Latency percentiles, µs.
    pub p50_us: f64,
    pub p99_us: f64,
    /// Answers other than 2xx/3xx, and socket errors (connect, read, write, timeout).
    pub errors: u64,
    /// Requests answered 2xx/3xx.
    pub requests: u64,
    /// The server process's CPU time per request answered 2xx/3xx, µs (all its threads).
    pub cpu_us: Option<f64>,
    /// Its context switches per answered request.
    pub switches: Option<f64>,
}

/// A wrk duration like `85.00us`, `1.20ms` or `2.01s`, in µs.
fn wrk_time_us(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        _ => return None,
    };
    Some(n * scale)
}

/// What a `wrk --latency` report says: requests per second, p50 and p99, errors.
pub(crate) fn parse_wrk(out: &str) -> Option<WrkRun> {
    let mut run = WrkRun::default();
    let (mut p50, mut p99, mut rate) = (None, None, None);
    let mut non_2xx = 0u64;
    for line in out.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("50%"), Some(t)) => p50 = wrk_time_us(t),
            (Some("99%"), Some(t)) => p99 = wrk_time_us(t),
            (Some("Requests/sec:"), Some(r)) => rate = r.parse().ok(),
            _ => {}
        }
        if let Some((n, _)) = line.split_once(" requests in ") {
            run.requests = n.trim().parse().unwrap_or(0);
        }
        if let Some(n) = line.strip_prefix("Non-2xx or 3xx responses:") {
            non_2xx += n.trim().parse::<u64>().unwrap_or(0);
        }
        if let Some(rest) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            run.errors += rest
                .split(',')
                .filter_map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    run.p50_us = p50?;
    run.p99_us = p99?;
    // wrk's "requests" and "Requests/sec" count every response, the non-2xx/3xx among them.
    let answered = run.requests;
    run.requests = answered.saturating_sub(non_2xx);
    let rate: f64 = rate?;
    run.rps = if answered > 0 { rate * run.requests as f64 / answered as f64 } else { 0.0 };
    run.errors += non_2xx;
    Some(run)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    const REPORT: &str = "Running 1s test @ http://127.0.0.1:8080/noop
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   310.21us  120.54us   4.01ms   90.12%
    Req/Sec    48.91k     2.01k   51.20k    80.00%
  Latency Distribution
     50%  290.00us
     75%  330.00us
     90%  400.00us
     99%    1.02ms
  48650 requests in 1.00s, 5.10MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 7
Requests/sec:  48612.35
Transfer/sec:      5.09MB
";

    #[test]
    fn reads_what_wrk_reports() {
        let run = parse_wrk(REPORT).unwrap();
        assert_eq!(run.p50_us, 290.0);
        assert_eq!(run.p99_us, 1020.0);
        // 7 of the 48 650 answers were not 2xx/3xx: not throughput.
        assert!((run.rps - 48612.35 * 48643.0 / 48650.0).abs() < 1e-6, "{}", run.rps);
        assert_eq!(run.errors, 12);
        assert_eq!(run.requests, 48643);
        assert_eq!(wrk_time_us("2.50s"), Some(2.5e6));
        assert_eq!(wrk_time_us("12"), None);
        assert!(parse_wrk("Requests/sec: 1\n").is_none(), "no latency distribution");
    }
}
