//! Command-line interface: one subcommand per job, each in its own module.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::{
    explain::ExplainArgs, manifests::ManifestsArgs, mutate::MutateArgs, serve::ServeArgs,
    workspaces::WorkspacesArgs,
};

/// outfit applies declarative mutations to Kubernetes objects: Kubeflow PodDefaults, Gatekeeper's
/// mutators (Assign, AssignMetadata, ModifySet, AssignImage), StatCan's filer shares and outfit's
/// own PodPolicies, offline (`mutate`, `explain`) or as a mutating admission webhook (`serve`,
/// installed with `manifests`); and it runs per-user workspaces on a cluster (`workspaces`).
#[derive(Debug, Parser)]
#[command(name = "outfit", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply policies to manifests on disk and print the result, as the webhook would mutate them.
    Mutate(MutateArgs),
    /// Explain, per object and per policy, whether it matched (and the clause that decided it),
    /// what it changed, or why it changed nothing.
    Explain(ExplainArgs),
    /// Print what a cluster needs to run outfit (CRDs, RBAC, Deployment, Service, webhook
    /// configuration), ready for `kubectl apply -f -`.
    Manifests(Box<ManifestsArgs>),
    /// Serve the mutating admission webhook over HTTPS (`POST /mutate`), with an admin port.
    Serve(Box<ServeArgs>),
    /// Serve the workspace backend: deic-dk's user-pods API (create, watch, list and delete
    /// per-user workspace pods with their storage, Services and Ingress) on the current cluster.
    Workspaces(WorkspacesArgs),
}

/// Parses the command line and runs the chosen command.
pub(crate) fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Mutate(args) => crate::mutate::run(&args),
        Command::Explain(args) => crate::explain::run(&args),
        Command::Manifests(args) => crate::manifests::run(&args),
        Command::Serve(args) => crate::serve::run(&args),
        Command::Workspaces(args) => crate::workspaces::run(&args),
    }
}
