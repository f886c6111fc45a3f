//! `luge`: the command-line front of the Luge runtime — serve functions, invoke them, compile
//! modules, benchmark a node and simulate scheduling policies.

mod bench;
mod compile;
mod errors;
mod invoke;
mod overhead;
mod serve;
mod sim;

use std::process::ExitCode;

// The manifest parser is the package's library target, so the fuzzer (`fuzz/`) can call it;
// `crate::manifest` names it for the other modules of the binary.
use luge::manifest;

use clap::{Parser, Subcommand};

/// Luge: a deadline-driven WebAssembly serverless runtime for edge servers.
#[derive(Debug, Parser)]
#[command(name = "luge", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve functions over HTTP/1.1 and UDP-RPC (the built-in examples without a manifest).
    Serve(serve::ServeArgs),
    /// Invoke a function on a running server (HTTP, or UDP-RPC with --rpc).
    Invoke(invoke::InvokeArgs),
    /// Validate and ahead-of-time compile a Wasm module, reporting what the runtime cannot run.
    Compile(compile::CompileArgs),
    /// Benchmark: drive a running node (`run`), or run a scenario against Luge and the
    /// baselines started in-process (`compare`, `noop`, `policies`, `density`, `sim-vs-real`,
    /// `overload`).
    Bench(bench::BenchArgs),
    /// List, add or remove functions on a running server.
    #[command(subcommand)]
    Functions(invoke::FunctionsCommand),
    /// Simulate scheduling policies on the papers' workloads (deterministic, any core count).
    Sim(Box<sim::SimArgs>),
    /// List the scheduling policies this build knows.
    Policies,
}

fn report(verb: &str, result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("luge {verb}: {}", errors::chain_text(&e));
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Policies => {
            for kind in luge_sched::PolicyKind::ALL {
                println!("{kind}");
            }
            ExitCode::SUCCESS
        }
        Command::Sim(args) => report("sim", sim::run(*args)),
        Command::Serve(args) => report("serve", serve::run(args)),
        Command::Bench(args) => report("bench", bench::run_bench(args)),
        Command::Compile(args) => report("compile", compile::run(args)),
        Command::Invoke(args) => report("invoke", invoke::invoke(args)),
        Command::Functions(cmd) => report("functions", invoke::functions(cmd)),
    }
}
