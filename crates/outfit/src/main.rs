//! The `outfit` command: parses arguments and hands over to [`cli::run`].

mod cli;
mod daemon;
mod explain;
mod failure;
mod inputs;
mod manifests;
mod mutate;
mod serve;
mod sign_in_args;
mod workspaces;

// The webhook allocates per request (the parsed object, the patch); glibc's malloc spent a fifth
// of the server's CPU under load in the benchmark (BENCHMARKS.md), mimalloc a fraction of that.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // One process-wide TLS provider: ring (no aws-lc-rs in the build). Fails only if another was
    // installed first, which nothing here does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    cli::run()
}
