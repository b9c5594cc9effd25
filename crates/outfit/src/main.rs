//! The `outfit` command: parses arguments and hands over to [`cli::run`].

mod cli;
mod manifests;
mod mutate;

fn main() -> std::process::ExitCode {
    cli::run()
}
