//! Loads a directory of policies into a `PolicySet` and reports the process's RSS before and
//! after, with the documents dropped: what a policy costs in memory once compiled, without the
//! webhook around it. For heap profilers (`heaptrack`), which see the system allocator this
//! example uses, not the mimalloc of the `outfit` binary.
//!
//!     cargo run --release -p outfit-core --example load-policies -- DIR

use std::path::PathBuf;

use outfit_core::{PolicySet, source};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.trim().trim_end_matches(" kB").parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: load-policies DIR");
        std::process::exit(2);
    };
    let before = rss_kib();
    let documents = match source::read_paths(&[dir]) {
        Ok(documents) => documents,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(2);
        }
    };
    let read = rss_kib();
    let mut builder = PolicySet::builder();
    builder.add_all(&documents);
    let count = documents.len();
    drop(documents);
    let (set, report) = builder.build();
    println!(
        "{count} documents, {} policies, {} errors; RSS {before} KiB at start, {read} KiB with the documents read, {} KiB with the set built and the documents dropped",
        set.len(),
        report.errors.len(),
        rss_kib()
    );
    // Leave the set allocated at exit, so that a heap profiler counts it as still in use.
    std::mem::forget(set);
}
