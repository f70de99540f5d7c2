//! `lakefish transform`: a new dataset from a committed one (job kind `transform`).

use anyhow::Context;
use lakefish_schemas::transform::{LeafScore, Transform, TransformSpec};
use lakefish_schemas::{DatasetName, Source};

#[derive(clap::Subcommand)]
pub(crate) enum TransformCommand {
    /// Nodchip's quiescence leaf: each position replaced by the leaf of its quiescence search
    /// (captures and promotions searched on material until the side to move stands pat), its
    /// ply advanced, score and result seen from the leaf's side to move; a leaf reached by
    /// captures gets the move 0000.
    QsearchLeaf {
        #[command(flatten)]
        io: TransformIo,
        /// The leaf's score: keep (the row's search score, negated when the side to move
        /// changed) or classical (lakefish's hand-written evaluation of the leaf).
        #[arg(long, default_value = "keep")]
        score: String,
        /// A position whose search takes more nodes is left as it is.
        #[arg(long, default_value_t = 100_000)]
        max_nodes: u64,
    },
    /// Every position scored again by a registered engine, as Stockfish's `transform
    /// rescore`: ucinewgame, position fen, go depth N (or nodes N), its last info score.
    Rescore {
        #[command(flatten)]
        io: TransformIo,
        /// ENGINE[,OPTION=VALUE...], a registered engine (lakefish engines ls), e.g.
        /// 'stockfish,Threads=1,Hash=16'. One process per thread.
        #[arg(long)]
        engine: String,
        /// Search depth per position.
        #[arg(long, conflicts_with = "nodes", required_unless_present = "nodes")]
        depth: Option<u32>,
        /// Nodes per position.
        #[arg(long)]
        nodes: Option<u64>,
    },
}

#[derive(clap::Args)]
pub(crate) struct TransformIo {
    /// The dataset read.
    #[arg(long)]
    dataset: DatasetName,
    /// Its source partition (binpack, lichess, selfplay); the output gets the same one.
    #[arg(long, default_value = "binpack")]
    source: String,
    /// The new dataset's name.
    #[arg(long)]
    output: DatasetName,
    /// Target rows per Parquet part.
    #[arg(long, default_value_t = 1_000_000)]
    rows_per_part: u64,
    /// CPU threads (default: all cores); with rescore, engine processes.
    #[arg(long)]
    pub(crate) threads: Option<usize>,
}

impl TransformCommand {
    pub(crate) fn threads(&self) -> Option<usize> {
        match self {
            TransformCommand::QsearchLeaf { io, .. } | TransformCommand::Rescore { io, .. } => {
                io.threads
            }
        }
    }

    pub(crate) fn spec(&self) -> anyhow::Result<TransformSpec> {
        let (io, transform) = match self {
            TransformCommand::QsearchLeaf {
                io,
                score,
                max_nodes,
            } => {
                let score = match score.as_str() {
                    "keep" => LeafScore::Keep,
                    "classical" => LeafScore::Classical,
                    other => anyhow::bail!("--score {other:?}: keep or classical"),
                };
                let t = Transform::QsearchLeaf {
                    score,
                    max_nodes: *max_nodes,
                };
                (io, t)
            }
            TransformCommand::Rescore {
                io,
                engine,
                depth,
                nodes,
            } => {
                let t = Transform::Rescore {
                    engine: engine.as_str().into(),
                    depth: *depth,
                    nodes: *nodes,
                };
                (io, t)
            }
        };
        let spec = TransformSpec {
            dataset: io.dataset.clone(),
            source: Source::parse(&io.source).with_context(|| {
                format!(
                    "--source {:?}: {}",
                    io.source,
                    lakefish_schemas::Source::CHOICES
                )
            })?,
            output: io.output.clone(),
            transform,
            rows_per_part: io.rows_per_part,
        };
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}
