//! `lakefish export`: a dataset or a shuffle written in another tool's format (docs in
//! `lakefish_jobs::export`), to a local file that appears whole or not at all.

use anyhow::Context;
use lakefish_jobs::export::{ExportFormat, export_rows};
use lakefish_schemas::export::RowsOf;
use lakefish_schemas::names::ShuffleId;
use lakefish_schemas::{DatasetName, MaskName, Source};

#[derive(clap::Args)]
pub(crate) struct ExportArgs {
    /// The dataset to write out (or --shuffle).
    pub dataset: Option<DatasetName>,
    /// Its source partition: binpack, lichess, selfplay, plain or bullet.
    #[arg(long, default_value = "binpack")]
    pub source: String,
    /// Only the rows this committed mask keeps.
    #[arg(long)]
    pub mask: Option<MaskName>,
    /// A committed shuffle instead of a dataset: its chunks in order, the rows already
    /// shuffled (sh-...).
    #[arg(long, conflicts_with = "dataset")]
    pub shuffle: Option<ShuffleId>,
    /// plain: Stockfish's text (fen, move, score, ply, result, e; scores in internal units,
    /// side to move's view), every column kept. binpack: Stockfish's .binpack (nnue-pytorch,
    /// Stockfish's tools), every column but the game id. bullet-text: `FEN | score | result`,
    /// White's view, centipawns and 1.0/0.5/0.0; the move and ply are dropped. bulletformat:
    /// bullet's 32-byte records, side to move's view, centipawns; also drops the side to
    /// move, castling, en passant and the fifty-move counter. Rows without a score or result
    /// are skipped and counted.
    #[arg(long)]
    pub format: String,
    /// The file to write (written beside it as FILE.partial, renamed when complete).
    #[arg(long, short)]
    pub output: std::path::PathBuf,
}

/// The rows a command's DATASET (with --source, --mask) or --shuffle name.
pub(crate) fn rows_named(
    dataset: Option<&DatasetName>,
    source: &str,
    mask: Option<&MaskName>,
    shuffle: Option<&ShuffleId>,
) -> anyhow::Result<RowsOf> {
    let source = Source::parse(source)
        .with_context(|| format!("--source {source:?}: {}", Source::CHOICES))?;
    lakefish_schemas::export::rows_of(dataset, source, mask, shuffle).map_err(|e| {
        anyhow::anyhow!(
            "{}",
            e.replace("dataset or shuffle:", "give a DATASET or --shuffle ID:")
                .replace("mask:", "--mask:")
        )
    })
}

pub(crate) fn run(lake: &str, rt: &tokio::runtime::Handle, a: ExportArgs) -> anyhow::Result<()> {
    let format = ExportFormat::parse(&a.format).map_err(|e| anyhow::anyhow!("--format: {e}"))?;
    let of = rows_named(
        a.dataset.as_ref(),
        &a.source,
        a.mask.as_ref(),
        a.shuffle.as_ref(),
    )?;
    let lake = crate::config::open_existing_lake(lake)?;
    let ctx = lakefish_jobs::JobContext::new(lake, rt.clone());
    let partial = a.output.with_extension(match a.output.extension() {
        Some(e) => format!("{}.partial", e.to_string_lossy()),
        None => "partial".into(),
    });
    let file = std::fs::File::create(&partial)
        .with_context(|| format!("cannot create {}", partial.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let started = std::time::Instant::now();
    let done = export_rows(&ctx, &of, format, &mut out, |read, total| {
        eprintln!(
            "[{:>5.0}s] {read}/{total} rows read",
            started.elapsed().as_secs_f64()
        )
    });
    let summary = match done.and_then(|s| {
        out.into_inner()
            .map_err(|e| lakefish_jobs::JobError::Failed(format!("writing the export: {e}")))?
            .sync_all()
            .map_err(|e| lakefish_jobs::JobError::Failed(format!("writing the export: {e}")))?;
        Ok(s)
    }) {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e.into());
        }
    };
    std::fs::rename(&partial, &a.output).with_context(|| {
        format!(
            "cannot rename {} to {}",
            partial.display(),
            a.output.display()
        )
    })?;
    println!("{}", serde_json::to_string_pretty(&summary)?);
    eprintln!(
        "wrote {} rows ({} bytes) to {}; skipped {} without a score, {} without a result{}{}",
        summary.rows_written,
        summary.bytes,
        a.output.display(),
        summary.no_score,
        summary.no_result,
        if summary.no_move > 0 {
            format!(", {} without a move", summary.no_move)
        } else {
            String::new()
        },
        if a.mask.is_some() {
            format!(", {} dropped by the mask", summary.masked_out)
        } else {
            String::new()
        }
    );
    Ok(())
}
