//! `luge`: the command-line front of the Luge runtime — serve functions, invoke them, compile
//! modules, benchmark a node and simulate scheduling policies.

mod sim;

use std::process::ExitCode;

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
    /// Serve functions over HTTP/1.1 and UDP-RPC (not yet available).
    Serve,
    /// Invoke a function on a running server (not yet available).
    Invoke,
    /// Validate and ahead-of-time compile a Wasm module (not yet available).
    Compile,
    /// Drive a running node with a workload and compare with baselines (not yet available).
    Bench,
    /// List, add or remove functions on a running server (not yet available).
    Functions,
    /// Simulate scheduling policies on the papers' workloads (deterministic, any core count).
    Sim(Box<sim::SimArgs>),
    /// List the scheduling policies this build knows.
    Policies,
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
        Command::Sim(args) => match sim::run(*args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("luge sim: {e:#}");
                ExitCode::FAILURE
            }
        },
        other => {
            eprintln!("luge: `{other:?}` is not implemented in this build yet");
            ExitCode::from(2)
        }
    }
}
