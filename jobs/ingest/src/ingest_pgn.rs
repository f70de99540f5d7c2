//! `ingest pgn`: PGN files (`.pgn`, or `.pgn.zst` as Lichess publishes them) →
//! `positions/source=lichess/dataset=<name>/month=YYYY-MM/` plus the `games` table beside it.
//!
//! Pipeline: one thread reads and decompresses the stream and cuts it into blocks of whole
//! games; the blocks are parsed on all cores as they come (SAN → moves, FENs, evals); rows
//! go in input order to per-month parts, which encoder threads write while reading goes on.
//! The manifest commits the dataset (see `dataset_writer`). Memory stays bounded by the
//! blocks in flight, whatever the file size.

use crate::dataset_writer::{IngestSummary, InputFormat, PartBuilder, Written, ingest};
use crate::pgn::{BlockRows, BlockSplitter, TooLongGame, ZSTD_MAGIC, parse_block};
use lakefish_lake::input::{Input, InputStream};
use lakefish_lake::{JobContext, JobError};
use lakefish_schemas::{IngestSpec, InputReport, JobId, SkippedGame, SkippedRange, Source};
use std::io::Read;
use std::sync::atomic::Ordering;

/// Skipped games listed one by one per input; beyond this they are counted.
const MAX_LISTED_SKIPS: usize = 1000;

pub fn ingest_pgn(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &IngestSpec,
) -> Result<IngestSummary, JobError> {
    ingest(ctx, job_id, spec, &FORMAT)
}

const FORMAT: InputFormat = InputFormat {
    source: Source::Lichess,
    has_games: true,
    thread_name: "pgn-parse",
    nothing_found: "the inputs hold no PGN games with moves",
    read: ingest_input,
};

/// The decompressed stream of an input: zstd when it starts with the zstd magic number.
fn open_stream<'a>(input: &'a Input, raw: InputStream<'a>) -> Result<Box<dyn Read + 'a>, JobError> {
    let head = input.read_at(0, input.len().min(4) as usize)?;
    if head == ZSTD_MAGIC {
        let decoder = zstd::stream::read::Decoder::new(raw).map_err(|e| JobError::Input {
            input: input.name().to_string(),
            reason: format!("cannot start zstd decompression: {e}"),
        })?;
        return Ok(Box::new(decoder));
    }
    if input.name().ends_with(".zst") {
        return Err(JobError::Input {
            input: input.name().to_string(),
            reason: "named .zst but not a zstd stream (no zstd magic number at byte 0)".into(),
        });
    }
    Ok(Box::new(raw))
}

struct InputState {
    report: InputReport,
    games: u64,
    unlisted: u64,
}

impl InputState {
    /// Reports, in input order, the games skipped for their length that lie before block
    /// number `blocks_taken`, and counts them so later games keep their numbers.
    fn take_too_long(&mut self, pending: &mut Vec<TooLongGame>, blocks_taken: u64, max: u64) {
        let zst = self.report.input.ends_with(".zst");
        pending.retain(|g| {
            if g.after_blocks > blocks_taken {
                return true;
            }
            self.games += 1;
            self.report.chunks = self.games;
            let place = if zst {
                " of the decompressed stream"
            } else {
                ""
            };
            self.report.skipped.push(SkippedRange {
                offset: g.offset,
                len: g.len,
                reason: format!(
                    "game {} at byte {}{place} runs on for more than {max} bytes without \
                     the next game starting ({} bytes skipped); raise max_game_bytes if \
                     it is a real game",
                    self.games, g.offset, g.len
                ),
            });
            false
        });
    }

    /// Takes one parsed block, in input order.
    fn take(&mut self, block: BlockRows, part: &mut PartBuilder) -> Result<(), JobError> {
        for (local, reason) in block.skipped {
            if self.report.skipped_games.len() < MAX_LISTED_SKIPS {
                self.report.skipped_games.push(SkippedGame {
                    game: self.games + local + 1,
                    reason,
                });
            } else {
                self.unlisted += 1;
            }
        }
        for (variant, n) in block.variants {
            *self.report.skipped_variants.entry(variant).or_default() += n;
        }
        self.games += block.games;
        self.report.chunks = self.games;
        for (month, rows) in block.months {
            self.report.rows += rows.rows.rows() as u64;
            part.push(&month, rows.rows, rows.games)?;
        }
        Ok(())
    }
}

fn ingest_input(
    ctx: &JobContext,
    spec: &IngestSpec,
    pool: &rayon::ThreadPool,
    input: &Input,
    part: &mut PartBuilder,
    written: &Written,
    progress: &dyn Fn(u64, u64),
) -> Result<InputReport, JobError> {
    let key = crate::binpack::input_key(input.name(), input.len());
    let mut state = InputState {
        report: InputReport::new(input.name(), input.len()),
        games: 0,
        unlisted: 0,
    };
    let (stream, read_failure) = InputStream::new(input);
    let read = stream.read.clone();
    let mut splitter = BlockSplitter::new(open_stream(input, stream)?, spec.max_game_bytes());
    // Blocks in flight (read, parsing, or parsed and waiting for an earlier one): this
    // thread reads ahead while the pool parses, and takes results in input order.
    let in_flight_max = (ctx.threads * 2).max(2) as u64;
    let (tx, rx) = std::sync::mpsc::channel::<(u64, std::thread::Result<BlockRows>)>();
    let parse = |seq: u64, (offset, data): (u64, Vec<u8>)| {
        let tx = tx.clone();
        pool.spawn(move || {
            // A panic must come back as an error: in a spawned task it would abort.
            let rows = std::panic::catch_unwind(|| parse_block(&data, key, offset));
            let _ = tx.send((seq, rows));
        });
    };
    let mut failure = None;
    let mut too_long = Vec::new();
    let (mut sent, mut taken) = (0u64, 0u64);
    let mut ready = std::collections::BTreeMap::new();
    let mut at_end = false;
    loop {
        while !at_end && sent - taken < in_flight_max {
            let next = splitter.next_block();
            too_long.extend(splitter.take_too_long());
            match next {
                Ok(Some(block)) => {
                    parse(sent, block);
                    sent += 1;
                }
                Ok(None) => at_end = true,
                // The input could not be read: nothing of it may be committed.
                Err(_) if let Some(e) = read_failure.take() => return Err(e),
                Err(e) => {
                    // Keep every complete game before the damage; drop the cut-off one.
                    let (blocks, dropped) = splitter.salvage();
                    too_long.extend(splitter.take_too_long());
                    for block in blocks {
                        parse(sent, block);
                        sent += 1;
                    }
                    let at = read.load(Ordering::Relaxed);
                    failure = Some(SkippedRange {
                        offset: at,
                        len: input.len().saturating_sub(at),
                        reason: format!(
                            "stream unreadable near byte {at} (truncated or corrupt?): {e}; the \
                             incomplete last game ({dropped} bytes) and everything after were \
                             dropped"
                        ),
                    });
                    at_end = true;
                }
            }
        }
        if taken == sent {
            break;
        }
        let (seq, rows) = rx.recv().expect("we hold a sender");
        let rows = rows.map_err(|_| {
            JobError::Panic(format!("parsing a block of {} (block {seq})", input.name()))
        })?;
        ready.insert(seq, rows);
        while let Some(block) = ready.remove(&taken) {
            // Long games before this block (the input's first game, say) come first.
            state.take_too_long(&mut too_long, taken, spec.max_game_bytes());
            state.take(block, part)?;
            taken += 1;
            state.take_too_long(&mut too_long, taken, spec.max_game_bytes());
        }
        if written.failed() {
            return Err(JobError::Internal("a part failed to write".into()));
        }
        progress(read.load(Ordering::Relaxed), part.total_rows);
    }
    state.take_too_long(&mut too_long, u64::MAX, spec.max_game_bytes());
    state.report.skipped.extend(failure);
    if state.unlisted > 0 {
        state.report.skipped_games.push(SkippedGame {
            game: 0,
            reason: format!(
                "and {} more games skipped (the first {MAX_LISTED_SKIPS} are listed)",
                state.unlisted
            ),
        });
    }
    Ok(state.report)
}
