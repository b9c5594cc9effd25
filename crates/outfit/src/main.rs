//! The `outfit` command: parses arguments and hands over to [`cli::run`].

mod cli;
mod mutate;
mod serve;

fn main() -> std::process::ExitCode {
    // One process-wide TLS provider: ring (no aws-lc-rs in the build). Fails only if another was
    // installed first, which nothing here does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    cli::run()
}
