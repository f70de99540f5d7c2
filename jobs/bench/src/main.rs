//! `lakefish-bench`: the benchmarks of the hot paths, each against a reference measured in the
//! same run, as a binary of its own so that the production `lakefish` links none of them (nor
//! their test servers). `lakefish bench ...` runs it. Prints each report, then the same numbers
//! as one JSON line (docs/BENCHMARKS.md quotes both).

fn main() -> anyhow::Result<()> {
    lakefish_bench::cli::main()
}
