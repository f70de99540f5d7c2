//! The engine's search speed with a random net, built from the engine crate alone (a release
//! build takes a minute, not the whole service's): compare two commits' evaluation paths by
//! alternating runs of this example (docs/BENCHMARKS.md, "Nets as data: search speed").
//!
//!   cargo run --release -p lakefish-engine --example nps -- all768:256x2:screlu 9 5
//!
//! Arguments: a random net's shape (FEATURES:ARCH, or a NetSpec file such as
//! infra/nets/bullet-3-input-buckets.toml), the search depth, and how many times to run the
//! bench (the best is printed with every run).

use std::sync::Arc;

use lakefish_engine::eval::Evaluator;
use lakefish_engine::features::FeatureSetKind;
use lakefish_engine::nnue::random_network;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: nps FEATURES:ARCH [DEPTH] [RUNS]";
    let shape = args.get(1).expect(usage);
    let depth: u32 = args.get(2).map_or(8, |d| d.parse().expect(usage));
    let runs: usize = args.get(3).map_or(3, |r| r.parse().expect(usage));
    let evaluator = if shape.ends_with(".toml") || shape.ends_with(".json") {
        let text = std::fs::read_to_string(shape).expect("a readable NetSpec file");
        let spec = lakefish_schemas::netspec::NetSpec::parse(&text).expect("a NetSpec");
        Evaluator::Spec(Arc::new(
            lakefish_engine::spec_net::random_spec_net(spec, 1).expect("a net the engine takes"),
        ))
    } else {
        let (features, arch) = shape.split_once(':').expect(usage);
        let features = FeatureSetKind::from_name(features).expect("a feature set");
        Evaluator::Nnue(Arc::new(random_network(features, arch, 1)))
    };
    let mut best = 0.0f64;
    for run in 1..=runs {
        let r = lakefish_engine::bench::bench(evaluator.clone(), depth);
        best = best.max(r.nps());
        println!(
            "{shape} depth {depth} run {run}: {} nodes, {:.3} s, {:.0} nodes/s (best {best:.0})",
            r.nodes,
            r.elapsed.as_secs_f64(),
            r.nps()
        );
    }
}
