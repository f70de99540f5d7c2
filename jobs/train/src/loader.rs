//! From shuffled chunks to ready batches: chunks are fetched one ahead of the one being
//! decoded, rows become sparse feature indices for both perspectives on worker threads, and
//! batches wait in a bounded queue (double buffering) for the trainer.
//!
//! The order of batches depends only on the chunk list and the batch size, so a resumed run
//! sees exactly the batches the uninterrupted run would have seen.

use crate::TrainError;
use arrow_array::{Array, Int8Array, Int16Array, RecordBatch, StringArray, UInt16Array};
use lakefish_engine::features::FeatureSetKind;
use lakefish_jobs::masks::keep_row;
use lakefish_schemas::MaskDefinition;
use rayon::prelude::*;
use shakmaty::{Board, Color};
use std::sync::mpsc::{Receiver, sync_channel};

/// One training position as the trainer needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Active features, side to move's perspective first.
    pub stm: Vec<u32>,
    pub nstm: Vec<u32>,
    /// Score for the side to move, Stockfish internal units.
    pub score: f32,
    /// Game result for the side to move: 0 loss, 0.5 draw, 1 win.
    pub result: f32,
    /// Material balance for the side to move (see [`material`]).
    pub material: f32,
}

/// Material balance for the side to move in internal units, with Stockfish's classical
/// middlegame piece values: the baseline predictor a trained net has to beat.
pub fn material(board: &Board, turn: Color) -> f32 {
    use shakmaty::Role;
    let value = |c: Color| {
        let ours = board.by_color(c);
        [
            (Role::Pawn, 208),
            (Role::Knight, 781),
            (Role::Bishop, 825),
            (Role::Rook, 1276),
            (Role::Queen, 2538),
        ]
        .iter()
        .map(|&(r, v)| (board.by_role(r) & ours).count() as i32 * v)
        .sum::<i32>()
    };
    (value(turn) - value(turn.other())) as f32
}

/// A batch in the layout `embedding_bag` takes: indices of all rows back to back, and the
/// offset where each row starts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    pub stm_indices: Vec<i64>,
    pub stm_offsets: Vec<i64>,
    pub nstm_indices: Vec<i64>,
    pub nstm_offsets: Vec<i64>,
    pub score: Vec<f32>,
    pub result: Vec<f32>,
    pub material: Vec<f32>,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.score.len()
    }

    pub fn is_empty(&self) -> bool {
        self.score.is_empty()
    }

    /// A row with features only (score, result and material zero): for evaluating nets.
    pub fn push_features(&mut self, stm: &[u32], nstm: &[u32]) {
        self.stm_offsets.push(self.stm_indices.len() as i64);
        self.stm_indices.extend(stm.iter().map(|&i| i as i64));
        self.nstm_offsets.push(self.nstm_indices.len() as i64);
        self.nstm_indices.extend(nstm.iter().map(|&i| i as i64));
        self.score.push(0.0);
        self.result.push(0.0);
        self.material.push(0.0);
    }

    fn push(&mut self, s: &Sample) {
        self.stm_offsets.push(self.stm_indices.len() as i64);
        self.stm_indices.extend(s.stm.iter().map(|&i| i as i64));
        self.nstm_offsets.push(self.nstm_indices.len() as i64);
        self.nstm_indices.extend(s.nstm.iter().map(|&i| i as i64));
        self.score.push(s.score);
        self.result.push(s.result);
        self.material.push(s.material);
    }
}

/// Parses the piece placement and side to move of a FEN (the rest is not needed).
pub fn parse_fen_board(fen: &str) -> Result<(Board, Color), String> {
    let mut parts = fen.split(' ');
    let board = parts.next().unwrap_or("");
    let board = Board::from_ascii_board_fen(board.as_bytes()).map_err(|e| e.to_string())?;
    let turn = match parts.next() {
        Some("w") => Color::White,
        Some("b") => Color::Black,
        other => return Err(format!("side to move {other:?} is neither w nor b")),
    };
    Ok((board, turn))
}

/// Decodes the rows of one chunk into samples, in row order, on the current rayon pool.
/// Rows without a score or a result are left out (a trainer cannot use them), and so are rows
/// a `filter` mask (the predicate of stored masks, `lakefish_jobs::masks::keep_row`) drops. A
/// malformed FEN is an error naming the chunk and row.
pub fn samples_of(
    batch: &RecordBatch,
    features: FeatureSetKind,
    filter: Option<&MaskDefinition>,
    chunk: &str,
) -> Result<Vec<Sample>, TrainError> {
    let col = |name: &str| {
        batch.column_by_name(name).ok_or_else(|| TrainError::Data {
            chunk: chunk.to_string(),
            reason: format!("no column {name}"),
        })
    };
    let wrong = |name: &str| TrainError::Data {
        chunk: chunk.to_string(),
        reason: format!("column {name} has the wrong type"),
    };
    let fen = col("fen")?
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| wrong("fen"))?;
    let score = col("score")?
        .as_any()
        .downcast_ref::<Int16Array>()
        .ok_or_else(|| wrong("score"))?;
    let result = col("result")?
        .as_any()
        .downcast_ref::<Int8Array>()
        .ok_or_else(|| wrong("result"))?;
    let mut rows: Vec<usize> = (0..batch.num_rows())
        .filter(|&i| score.is_valid(i) && result.is_valid(i))
        .collect();
    if let Some(def) = filter {
        let moves = col("move")?
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| wrong("move"))?;
        let ply = col("ply")?
            .as_any()
            .downcast_ref::<UInt16Array>()
            .ok_or_else(|| wrong("ply"))?;
        let keep = rows
            .par_iter()
            .map(|&i| {
                keep_row(
                    def,
                    fen.value(i),
                    moves.value(i),
                    Some(score.value(i)),
                    ply.value(i),
                )
                .map_err(|reason| TrainError::Data {
                    chunk: chunk.to_string(),
                    reason: format!("row {i}: {reason}"),
                })
            })
            .collect::<Result<Vec<bool>, _>>()?;
        rows = rows
            .into_iter()
            .zip(keep)
            .filter_map(|(i, k)| k.then_some(i))
            .collect();
    }
    rows.par_iter()
        .map(|&i| {
            let (board, turn) =
                parse_fen_board(fen.value(i)).map_err(|reason| TrainError::Data {
                    chunk: chunk.to_string(),
                    reason: format!("row {i}: FEN {:?}: {reason}", fen.value(i)),
                })?;
            let mut stm = Vec::with_capacity(features.max_active());
            let mut nstm = Vec::with_capacity(features.max_active());
            let bad = |e: lakefish_engine::features::FeatureError| TrainError::Data {
                chunk: chunk.to_string(),
                reason: format!("row {i}: FEN {:?}: {e}", fen.value(i)),
            };
            features
                .active_features(&board, turn, &mut stm)
                .map_err(bad)?;
            features
                .active_features(&board, turn.other(), &mut nstm)
                .map_err(bad)?;
            Ok(Sample {
                material: material(&board, turn),
                stm,
                nstm,
                score: score.value(i) as f32,
                result: (result.value(i) as f32 + 1.0) / 2.0,
            })
        })
        .collect()
}

/// Where a chunk's rows come from: the loader asks for chunk `i` and gets its record batch.
pub trait ChunkSource: Send + Sync {
    fn chunks(&self) -> usize;
    fn name(&self, i: usize) -> String;
    fn read(&self, i: usize) -> Result<RecordBatch, TrainError>;
}

/// Streams batches of `batch_size` over `order` (chunk indices), skipping the first `skip`
/// batches (resume). The last, partial batch is dropped, as training loops do.
pub fn stream_batches(
    source: std::sync::Arc<dyn ChunkSource>,
    order: Vec<usize>,
    features: FeatureSetKind,
    filter: Option<MaskDefinition>,
    batch_size: usize,
    skip: usize,
    threads: usize,
) -> Receiver<Result<Batch, TrainError>> {
    let (tx, rx) = sync_channel::<Result<Batch, TrainError>>(2);
    std::thread::Builder::new()
        .name("loader".into())
        .spawn(move || {
            let pool = match rayon::ThreadPoolBuilder::new()
                .num_threads(threads.max(1))
                .build()
            {
                Ok(p) => p,
                Err(e) => {
                    let _ = tx.send(Err(TrainError::Internal(e.to_string())));
                    return;
                }
            };
            // Chunk k+1 is fetched while chunk k is decoded.
            let (ctx, crx) = sync_channel::<(usize, Result<RecordBatch, TrainError>)>(1);
            let fetch_source = source.clone();
            let fetch_order = order.clone();
            std::thread::spawn(move || {
                for i in fetch_order {
                    if ctx.send((i, fetch_source.read(i))).is_err() {
                        return;
                    }
                }
            });
            let mut current = Batch::default();
            let mut emitted = 0usize;
            for (i, read) in crx {
                let samples = read.and_then(|b| {
                    pool.install(|| samples_of(&b, features, filter.as_ref(), &source.name(i)))
                });
                let samples = match samples {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                for s in &samples {
                    current.push(s);
                    if current.len() == batch_size {
                        let full = std::mem::take(&mut current);
                        if emitted >= skip && tx.send(Ok(full)).is_err() {
                            return;
                        }
                        emitted += 1;
                    }
                }
            }
        })
        .expect("spawn loader thread");
    rx
}
