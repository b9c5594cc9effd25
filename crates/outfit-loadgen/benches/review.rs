//! The admission path without the network: each body of the load generator's review mix decided
//! by `outfit_server::admission::review` against the loadgen's 1,000 PodDefaults, from the raw
//! request body to the encoded response. What the webhook spends per request on top of TLS and
//! HTTP, measured deterministically enough to compare changes.
//!
//! Run: `cargo bench -p outfit-loadgen --bench review`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use outfit_core::PolicySet;
use outfit_loadgen::mix;
use outfit_server::{Metrics, admission, policies::PolicyStore};

// The allocator the `outfit` binary ships with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const POLICIES: usize = 1_000;
const NAMESPACES: usize = 50;

fn policy_set(count: usize) -> std::sync::Arc<PolicySet> {
    let dir = std::env::temp_dir().join(format!("outfit-review-bench-{}-{count}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    mix::generate_policies(&dir, count, NAMESPACES).expect("policies");
    let store = PolicyStore::load(vec![dir.clone()], "default", Metrics::new(), None).expect("loads");
    let set = store.current().load_full();
    let _ = std::fs::remove_dir_all(&dir);
    set
}

fn bench_review(c: &mut Criterion) {
    let bodies = mix::review_mix(NAMESPACES, POLICIES / NAMESPACES);
    let mut group = c.benchmark_group("review");
    group.throughput(Throughput::Elements(bodies.len() as u64));
    for count in [0, POLICIES] {
        let set = policy_set(count);
        let mutated = bodies
            .iter()
            .filter(|b| admission::review(b, &set).expect("valid").outcome.as_str() == "mutated")
            .count();
        assert_eq!(
            mutated > 0,
            count > 0,
            "the mix must be mutated exactly when policies load"
        );
        // One iteration decides the whole mix of 200 bodies; criterion reports time per body.
        group.bench_function(format!("mix/{count}"), |b| {
            b.iter(|| {
                bodies
                    .iter()
                    .map(|body| admission::review(black_box(body), &set).map_or(0, |a| a.body.len()))
                    .sum::<usize>()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_review);
criterion_main!(benches);
