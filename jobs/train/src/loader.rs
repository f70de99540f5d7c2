//! From shuffled chunks to ready batches: chunks are read and decoded from Parquet by a few
//! reader threads ahead of the one being turned into features, a chunk's rows become sparse
//! feature indices for both perspectives in pieces on worker threads, batches are cut from
//! the pieces in row order and wait in a bounded queue for the trainer, which hands each one
//! back for reuse.
//!
//! The order of batches depends only on the chunk list and the batch size, so a resumed run
//! sees exactly the batches the uninterrupted run would have seen.

use crate::TrainError;
use arrow_array::{
    Array, FixedSizeBinaryArray, Int8Array, Int16Array, RecordBatch, StringArray, UInt16Array,
};
use lakefish_engine::features::{FeatureSetKind, Men};
use lakefish_engine::packed_board;
use lakefish_jobs::masks::{keep_packed_row, keep_row};
use lakefish_schemas::MaskDefinition;
use rayon::prelude::*;
use shakmaty::{Board, Color};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

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

/// [`material`] from twelve piece planes (index `6·colour + role`, White first).
pub fn material_of_planes(planes: &[u64; 12], turn: Color) -> f32 {
    const VALUES: [i32; 5] = [208, 781, 825, 1276, 2538];
    let side = |c: usize| -> i32 {
        VALUES
            .iter()
            .enumerate()
            .map(|(r, v)| planes[6 * c + r].count_ones() as i32 * v)
            .sum()
    };
    let (white, black) = (side(0), side(1));
    (match turn {
        Color::White => white - black,
        Color::Black => black - white,
    }) as f32
}

/// A batch in the layout `embedding_bag` takes: indices of all rows back to back, and the
/// offset where each row starts. Both are `i32` (`embedding_bag` takes int32 indices with
/// int32 offsets): half the bytes of `i64` to write, copy and move to a device, and every
/// feature set's index and a batch's offsets fit with room to spare.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    pub stm_indices: Vec<i32>,
    pub stm_offsets: Vec<i32>,
    pub nstm_indices: Vec<i32>,
    pub nstm_offsets: Vec<i32>,
    pub score: Vec<f32>,
    pub result: Vec<f32>,
    /// One per row, or empty when the stream was not asked for it ([`RowOptions::material`]).
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
        self.stm_offsets.push(self.stm_indices.len() as i32);
        self.stm_indices.extend(stm.iter().map(|&i| i as i32));
        self.nstm_offsets.push(self.nstm_indices.len() as i32);
        self.nstm_indices.extend(nstm.iter().map(|&i| i as i32));
        self.score.push(0.0);
        self.result.push(0.0);
        self.material.push(0.0);
    }

    /// Room for `rows` rows of up to `max_active` features per perspective.
    pub fn with_capacity(rows: usize, max_active: usize) -> Batch {
        Batch {
            stm_indices: Vec::with_capacity(rows * max_active),
            stm_offsets: Vec::with_capacity(rows),
            nstm_indices: Vec::with_capacity(rows * max_active),
            nstm_offsets: Vec::with_capacity(rows),
            score: Vec::with_capacity(rows),
            result: Vec::with_capacity(rows),
            material: Vec::with_capacity(rows),
        }
    }

    /// Empties the batch and keeps its memory (see [`BatchStream::give_back`]).
    pub fn clear(&mut self) {
        self.stm_indices.clear();
        self.stm_offsets.clear();
        self.nstm_indices.clear();
        self.nstm_offsets.clear();
        self.score.clear();
        self.result.clear();
        self.material.clear();
    }

    /// Appends rows `rows` of `src`, in order: whole slices copied, offsets rebased.
    pub fn append_rows(&mut self, src: &Batch, rows: std::ops::Range<usize>) {
        fn side(
            dst_i: &mut Vec<i32>,
            dst_o: &mut Vec<i32>,
            src_i: &[i32],
            src_o: &[i32],
            rows: &std::ops::Range<usize>,
        ) {
            let from = src_o[rows.start] as usize;
            let to = src_o.get(rows.end).map_or(src_i.len(), |&o| o as usize);
            let shift = dst_i.len() as i32 - from as i32;
            dst_o.extend(src_o[rows.clone()].iter().map(|&o| o + shift));
            dst_i.extend_from_slice(&src_i[from..to]);
        }
        if rows.is_empty() {
            return;
        }
        side(
            &mut self.stm_indices,
            &mut self.stm_offsets,
            &src.stm_indices,
            &src.stm_offsets,
            &rows,
        );
        side(
            &mut self.nstm_indices,
            &mut self.nstm_offsets,
            &src.nstm_indices,
            &src.nstm_offsets,
            &rows,
        );
        self.score.extend_from_slice(&src.score[rows.clone()]);
        self.result.extend_from_slice(&src.result[rows.clone()]);
        if !src.material.is_empty() {
            self.material.extend_from_slice(&src.material[rows]);
        }
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

/// Rows per piece of a chunk decoded by one task (see [`chunk_rows`]).
const PIECE_ROWS: usize = 2048;

/// How a chunk's rows are split into the pieces decoded in parallel: the first `first` rows,
/// then `rows` at a time. The loader lines pieces up with its batches (the first piece
/// completes the batch the previous chunk left partial, the next ones are a batch each),
/// so that a piece holding every one of its rows is handed on as a batch, not copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PieceLayout {
    pub first: usize,
    pub rows: usize,
}

impl PieceLayout {
    /// Pieces of [`PIECE_ROWS`] rows.
    pub const EVEN: PieceLayout = PieceLayout {
        first: PIECE_ROWS,
        rows: PIECE_ROWS,
    };

    /// The pieces' row ranges over `n` rows.
    fn ranges(self, n: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
        let (first, rows) = (self.first.max(1), self.rows.max(1));
        let starts = std::iter::once(0).chain((first..n).step_by(rows));
        starts
            .take_while(move |&start| start < n)
            .map(move |start| start..(if start == 0 { first } else { start + rows }).min(n))
    }
}

/// Where a chunk's boards come from: packed boards (chunks since packed boards), or FEN text
/// parsed row by row (older chunks, and the old loader the bench measures beside the new).
#[derive(Clone, Copy)]
enum Boards<'a> {
    Packed(&'a FixedSizeBinaryArray),
    Fen(&'a StringArray),
}

impl Boards<'_> {
    fn board(&self, i: usize) -> Result<(Board, Color), String> {
        match self {
            Boards::Packed(b) => packed_board::from_bytes(b.value(i))
                .and_then(packed_board::board_of)
                .map_err(|e| format!("packed board: {e}")),
            Boards::Fen(f) => {
                parse_fen_board(f.value(i)).map_err(|e| format!("FEN {:?}: {e}", f.value(i)))
            }
        }
    }

    fn keep(
        &self,
        def: &MaskDefinition,
        i: usize,
        uci: &str,
        score: i16,
        ply: u16,
    ) -> Result<bool, String> {
        match self {
            Boards::Packed(b) => {
                let board = packed_board::from_bytes(b.value(i)).map_err(|e| e.to_string())?;
                keep_packed_row(def, board, uci, Some(score), ply)
            }
            Boards::Fen(f) => keep_row(def, f.value(i), uci, Some(score), ply),
        }
    }
}

/// Every row's FEN of a chunk batch: decoded from its packed boards, or its `fen` column in a
/// chunk from before them. For the few readers that want text (quantization's probe
/// positions); the loader itself never makes text.
pub fn chunk_fens(batch: &RecordBatch) -> Result<Vec<String>, String> {
    use lakefish_schemas::positions::{COL_BOARD, COL_FEN};
    match batch.column_by_name(COL_BOARD) {
        Some(_) => {
            let b = column::<FixedSizeBinaryArray>(batch, COL_BOARD)?;
            (0..b.len())
                .map(|i| {
                    if b.is_null(i) {
                        return Err(format!("row {i}: the board cell is empty"));
                    }
                    packed_board::from_bytes(b.value(i))
                        .and_then(packed_board::unpack_fen)
                        .map_err(|e| format!("row {i}: packed board: {e}"))
                })
                .collect()
        }
        None => {
            let f = column::<StringArray>(batch, COL_FEN)?;
            Ok((0..f.len()).map(|i| f.value(i).to_string()).collect())
        }
    }
}

/// The columns the loader reads from a chunk: no FEN text where packed boards exist
/// ([`ChunkSource::read`] gives `fen` instead for chunks without them), the move and ply
/// only for a filter.
pub fn loader_columns(filter: bool) -> Vec<&'static str> {
    use lakefish_schemas::positions::{COL_BOARD, COL_MOVE, COL_PLY, COL_RESULT, COL_SCORE};
    let mut out = vec![COL_BOARD, COL_SCORE, COL_RESULT];
    if filter {
        out.extend([COL_MOVE, COL_PLY]);
    }
    out
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> Result<&'a T, String> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| format!("column {name} missing or of the wrong type"))
}

/// Decodes the rows of one chunk into batch layout, in row order, on the current rayon pool:
/// pieces of [`PIECE_ROWS`] rows are decoded in parallel, each straight into its own
/// [`Batch`] (no allocation per row). Boards come from the chunk's packed `board` column
/// where the batch has it, else from its FEN text. Rows without a score or a result are left
/// out (a trainer cannot use them), and so are rows a `filter` mask (the predicate of stored
/// masks, `lakefish_jobs::masks::keep_row`) drops. With `mirror`, each board is flipped left
/// to right (files a↔h) before its features are taken: the same position seen from the other
/// wing, which a net should score the same (augmentation). A malformed board is an error
/// naming the chunk and row.
pub fn chunk_rows(
    batch: &RecordBatch,
    features: FeatureSetKind,
    filter: Option<&MaskDefinition>,
    mirror: Mirror,
    chunk: &str,
) -> Result<Vec<Batch>, TrainError> {
    let mut pieces = Vec::new();
    let layout = PieceLayout::EVEN;
    chunk_rows_into(
        batch,
        features,
        filter,
        mirror,
        true,
        layout,
        chunk,
        &mut pieces,
    )?;
    Ok(pieces)
}

/// [`chunk_rows`] into `pieces` laid out as `layout` says, with each row's material only when
/// `with_material` (training batches do not use it; validation does), and whose buffers are
/// cleared and reused (grown as needed): the loader hands the same pieces in for every chunk,
/// so decoding writes into memory already paged in instead of faulting in fresh pages for
/// each chunk.
#[allow(clippy::too_many_arguments)]
pub fn chunk_rows_into(
    batch: &RecordBatch,
    features: FeatureSetKind,
    filter: Option<&MaskDefinition>,
    mirror: Mirror,
    with_material: bool,
    layout: PieceLayout,
    chunk: &str,
    pieces: &mut Vec<Batch>,
) -> Result<(), TrainError> {
    use lakefish_schemas::positions::{
        COL_BOARD, COL_FEN, COL_MOVE, COL_PLY, COL_RESULT, COL_SCORE,
    };
    let data = |reason: String| TrainError::Data {
        chunk: chunk.to_string(),
        reason,
    };
    let boards = match batch.column_by_name(COL_BOARD) {
        Some(_) => {
            let b = column::<FixedSizeBinaryArray>(batch, COL_BOARD).map_err(data)?;
            // A damaged file may declare the column nullable: an empty cell is no position.
            if b.null_count() > 0 {
                return Err(data(format!("{} board cells are empty", b.null_count())));
            }
            Boards::Packed(b)
        }
        None => Boards::Fen(column::<StringArray>(batch, COL_FEN).map_err(data)?),
    };
    let score = column::<Int16Array>(batch, COL_SCORE).map_err(data)?;
    let result = column::<Int8Array>(batch, COL_RESULT).map_err(data)?;
    let filter_cols = match filter {
        Some(def) => Some((
            def,
            column::<StringArray>(batch, COL_MOVE).map_err(data)?,
            column::<UInt16Array>(batch, COL_PLY).map_err(data)?,
        )),
        None => None,
    };
    let row_error = |i: usize, reason: String| data(format!("row {i}: {reason}"));
    let ranges: Vec<_> = layout.ranges(batch.num_rows()).collect();
    pieces.truncate(ranges.len());
    pieces.resize_with(ranges.len(), || {
        Batch::with_capacity(layout.rows, features.max_active())
    });
    // The common case, every row kept: scores and results are converted column-wise, and no
    // row is checked one by one.
    let every_row = filter.is_none() && score.null_count() == 0 && result.null_count() == 0;
    pieces
        .par_iter_mut()
        .zip(ranges)
        .map(|(out, rows)| {
            out.clear();
            let (start, end) = (rows.start, rows.end);
            // Row i's offsets, features and (when wanted) material into `out`.
            let features_of = |i: usize, out: &mut Batch| -> Result<(), TrainError> {
                let mirror = mirror.row(chunk, i);
                out.stm_offsets.push(out.stm_indices.len() as i32);
                out.nstm_offsets.push(out.nstm_indices.len() as i32);
                let row_material = match boards {
                    // Packed: features straight from the occupancy and the piece codes.
                    Boards::Packed(b) => {
                        let board = packed_board::from_bytes(b.value(i))
                            .map_err(|e| row_error(i, format!("packed board: {e}")))?;
                        let turn = packed_board::active_pair(
                            board,
                            features,
                            mirror,
                            &mut out.stm_indices,
                            &mut out.nstm_indices,
                        )
                        .map_err(|e| row_error(i, e.to_string()))?;
                        match with_material {
                            true => Some(material_of_planes(
                                &packed_board::planes_of(board)
                                    .map_err(|e| row_error(i, format!("packed board: {e}")))?
                                    .0,
                                turn,
                            )),
                            false => None,
                        }
                    }
                    // FEN text: the same pass over the men of the parsed board.
                    Boards::Fen(_) => {
                        let (board, turn) =
                            boards.board(i).map_err(|reason| row_error(i, reason))?;
                        Men::of_board(&board)
                            .and_then(|men| {
                                features.active_pair_from_men(
                                    &men,
                                    turn,
                                    mirror,
                                    &mut out.stm_indices,
                                    &mut out.nstm_indices,
                                )
                            })
                            .map_err(|e| row_error(i, e.to_string()))?;
                        with_material.then(|| material(&board, turn))
                    }
                };
                out.material.extend(row_material);
                Ok(())
            };
            let to_result = |r: i8| (r as f32 + 1.0) / 2.0;
            if every_row {
                for i in start..end {
                    features_of(i, out)?;
                }
                out.score
                    .extend(score.values()[start..end].iter().map(|&s| s as f32));
                out.result
                    .extend(result.values()[start..end].iter().map(|&r| to_result(r)));
                return Ok(());
            }
            for i in start..end {
                if !(score.is_valid(i) && result.is_valid(i)) {
                    continue;
                }
                if let Some((def, moves, ply)) = filter_cols {
                    let keep = boards
                        .keep(def, i, moves.value(i), score.value(i), ply.value(i))
                        .map_err(|reason| row_error(i, reason))?;
                    if !keep {
                        continue;
                    }
                }
                features_of(i, out)?;
                out.score.push(score.value(i) as f32);
                out.result.push(to_result(result.value(i)));
            }
            Ok(())
        })
        .collect()
}

/// Where a chunk's rows come from: the loader asks for chunk `i` and gets its record batch.
pub trait ChunkSource: Send + Sync {
    fn chunks(&self) -> usize;
    fn name(&self, i: usize) -> String;
    /// Chunk `i` with at least the columns named (all of them when none are), and `fen` in
    /// place of a `board` the chunk lacks ([`lakefish_lake::parts::read_chunk`]).
    fn read(&self, i: usize, columns: &[&str]) -> Result<RecordBatch, TrainError>;
}

/// Batches as the loader produces them; hand each one back with [`BatchStream::give_back`]
/// once its contents are copied out, so the next batch reuses its memory instead of
/// faulting in fresh pages.
pub struct BatchStream {
    batches: Receiver<Message>,
    spare: SyncSender<Batch>,
    ended: bool,
}

/// What the loader thread sends: a batch (or the error that stopped it), then `End` once
/// every chunk was read, so a loader that died (a panic) is told apart from one that finished.
enum Message {
    Batch(Result<Batch, TrainError>),
    End,
}

impl BatchStream {
    /// Returns a used batch to the loader (dropped if the loader has enough spares).
    pub fn give_back(&self, batch: Batch) {
        let _ = self.spare.try_send(batch);
    }
}

impl Iterator for BatchStream {
    type Item = Result<Batch, TrainError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.ended {
            return None;
        }
        match self.batches.recv() {
            Ok(Message::Batch(Ok(b))) => Some(Ok(b)),
            Ok(Message::Batch(Err(e))) => {
                self.ended = true;
                Some(Err(e))
            }
            Ok(Message::End) => {
                self.ended = true;
                None
            }
            Err(_) => {
                self.ended = true;
                Some(Err(TrainError::Internal(
                    "the loader stopped before the end of its chunks (a thread panicked)".into(),
                )))
            }
        }
    }
}

/// Which rows are seen mirrored (files a↔h).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum Mirror {
    #[default]
    None,
    All,
    /// About this fraction of the rows, chosen by [`Mirror::chosen`] from the seed.
    Fraction {
        fraction: f64,
        seed: u64,
    },
}

impl Mirror {
    /// Whether row `row` of chunk `chunk` is mirrored.
    pub fn row(self, chunk: &str, row: usize) -> bool {
        match self {
            Mirror::None => false,
            Mirror::All => true,
            Mirror::Fraction { fraction, seed } => Mirror::chosen(seed, chunk, row) < fraction,
        }
    }

    /// The seeding rule, written so another implementation can repeat it: FNV-1a (64 bits)
    /// of the chunk's name, XOR the seed, XOR the row times 0x9E3779B97F4A7C15, through one
    /// SplitMix64 step; its top 53 bits as a fraction in [0, 1).
    pub fn chosen(seed: u64, chunk: &str, row: usize) -> f64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for b in chunk.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        let mut z = (h ^ seed ^ (row as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Which rows a stream keeps and how it presents them.
#[derive(Debug, Clone, Default)]
pub struct RowOptions {
    /// Rows this mask definition drops are left out ([`chunk_rows`]).
    pub filter: Option<MaskDefinition>,
    /// Which boards are flipped a↔h before their features are taken ([`chunk_rows`]).
    pub mirror: Mirror,
    /// Each row's material balance in [`Batch::material`] (the material-only baseline of
    /// validation); left empty otherwise.
    pub material: bool,
    /// The rows after the last whole batch as one shorter batch (validation, where every row
    /// counts); training drops them, as training loops do.
    pub partial_last: bool,
}

/// Streams batches of `batch_size` over `order` (chunk indices), skipping the first `skip`
/// batches (resume). The last, partial batch is dropped unless [`RowOptions::partial_last`].
///
/// Chunks are fetched and decoded from Parquet by a few reader threads ahead of the one being
/// turned into features (on `threads` threads); the batches are cut from the rows in chunk
/// order, so their contents do not depend on the thread counts.
pub fn stream_batches(
    source: std::sync::Arc<dyn ChunkSource>,
    order: Vec<usize>,
    features: FeatureSetKind,
    rows: RowOptions,
    batch_size: usize,
    skip: usize,
    threads: usize,
) -> BatchStream {
    let RowOptions {
        filter,
        mirror,
        material: with_material,
        partial_last,
    } = rows;
    let columns = loader_columns(filter.is_some());
    assert!(batch_size > 0, "a batch holds at least one row");
    let (tx, rx) = sync_channel::<Message>(2);
    // Room for the batches of a chunk or two handed back while the loader decodes.
    let (spare_tx, spare_rx) = sync_channel::<Batch>(32);
    std::thread::Builder::new()
        .name("loader".into())
        .spawn(move || {
            let pool = match rayon::ThreadPoolBuilder::new()
                .num_threads(threads.max(1))
                .build()
            {
                Ok(p) => p,
                Err(e) => {
                    let _ = tx.send(Message::Batch(Err(TrainError::Internal(e.to_string()))));
                    return;
                }
            };
            let chunks = read_ahead(source.clone(), order, columns, (threads / 4).clamp(1, 4));
            let new_batch = || match spare_rx.try_recv() {
                Ok(mut b) => {
                    b.clear();
                    b
                }
                Err(_) => Batch::with_capacity(batch_size, features.max_active()),
            };
            let mut current = new_batch();
            let mut emitted = 0usize;
            // Cuts a decoded chunk's pieces into batches, in row order; false once the
            // consumer is gone. A piece that is a whole batch by itself (the layout lines
            // them up) is handed on as it is, a fresh buffer left in its place; one that
            // starts a batch becomes the batch being filled.
            let mut emit = |pieces: &mut [Batch]| -> bool {
                for piece in pieces {
                    if current.is_empty() && emitted >= skip {
                        if piece.len() == batch_size {
                            let full = std::mem::replace(piece, new_batch());
                            if tx.send(Message::Batch(Ok(full))).is_err() {
                                return false;
                            }
                            emitted += 1;
                            continue;
                        }
                        if piece.len() < batch_size {
                            // The start of a batch (a chunk's last piece): taken as it is,
                            // the empty buffer left in its place.
                            std::mem::swap(&mut current, piece);
                            continue;
                        }
                    }
                    let mut row = 0;
                    while row < piece.len() {
                        let take = (batch_size - current.len()).min(piece.len() - row);
                        // Batches before `skip` are only counted, not built.
                        if emitted >= skip {
                            current.append_rows(piece, row..row + take);
                        } else {
                            current.score.resize(current.len() + take, 0.0);
                        }
                        row += take;
                        if current.len() == batch_size {
                            if emitted >= skip {
                                let full = std::mem::replace(&mut current, new_batch());
                                if tx.send(Message::Batch(Ok(full))).is_err() {
                                    return false;
                                }
                            } else {
                                current.clear();
                            }
                            emitted += 1;
                        }
                    }
                }
                true
            };
            // Pieces a batch long, the first completing the batch `fill` rows long that the
            // chunks before left. The even layout for small batches (pieces of a batch each
            // would be too small to be worth a task) and for chunks with fewer batches than
            // the pool has threads (too few pieces to keep them busy).
            let layout = |fill: usize, rows: usize| {
                if batch_size >= PIECE_ROWS && rows / batch_size >= threads.max(1) {
                    PieceLayout {
                        first: batch_size - fill,
                        rows: batch_size,
                    }
                } else {
                    PieceLayout::EVEN
                }
            };
            let decode = |(i, read): (usize, Result<RecordBatch, TrainError>),
                          fill: usize,
                          pieces: &mut Vec<Batch>| {
                read.and_then(|b| {
                    chunk_rows_into(
                        &b,
                        features,
                        filter.as_ref(),
                        mirror,
                        with_material,
                        layout(fill, b.num_rows()),
                        &source.name(i),
                        pieces,
                    )
                })
            };
            let kept = |pieces: &[Batch]| pieces.iter().map(Batch::len).sum::<usize>();
            // Two sets of decoded pieces, their buffers reused chunk after chunk: the pool
            // decodes the next chunk into one while this thread cuts the other into batches.
            let (mut ready, mut next_pieces): (Vec<Batch>, Vec<Batch>) = (Vec::new(), Vec::new());
            let mut chunks = chunks;
            let mut decoded = match chunks.next() {
                Some(first) => pool.install(|| decode(first, 0, &mut ready)),
                None => Ok(()),
            };
            // Rows kept so far, up to the decoded chunk: where the next chunk's first piece
            // has to end.
            let mut rows_kept = 0usize;
            let mut more = true;
            while more {
                if let Err(e) = decoded {
                    let _ = tx.send(Message::Batch(Err(e)));
                    return;
                }
                rows_kept += kept(&ready);
                let next = chunks.next();
                more = next.is_some();
                let mut next_decoded = Ok(());
                let mut consumer_alive = true;
                pool.in_place_scope(|scope| {
                    if let Some(next) = next {
                        let (pieces, out) = (&mut next_pieces, &mut next_decoded);
                        let decode = &decode;
                        let fill = rows_kept % batch_size;
                        scope.spawn(move |_| *out = decode(next, fill, pieces));
                    }
                    consumer_alive = emit(&mut ready);
                });
                if !consumer_alive {
                    return;
                }
                std::mem::swap(&mut ready, &mut next_pieces);
                decoded = next_decoded;
            }
            if partial_last && !current.is_empty() && emitted >= skip {
                let _ = tx.send(Message::Batch(Ok(current)));
            }
            let _ = tx.send(Message::End);
        })
        .expect("spawn loader thread");
    BatchStream {
        batches: rx,
        spare: spare_tx,
        ended: false,
    }
}

/// Reads chunks `order` on `readers` threads (reader k takes every k-th chunk) and yields them
/// in `order`. Each reader holds at most two chunks (one waiting, one being read), so up to
/// `2 * readers` decoded chunks are in memory besides the one being turned into features. A
/// reader that dies (a panic) yields an error for its chunk, not a silent end.
fn read_ahead(
    source: std::sync::Arc<dyn ChunkSource>,
    order: Vec<usize>,
    columns: Vec<&'static str>,
    readers: usize,
) -> impl Iterator<Item = (usize, Result<RecordBatch, TrainError>)> {
    let receivers: Vec<_> = (0..readers)
        .map(|k| {
            let (tx, rx) = sync_channel::<(usize, Result<RecordBatch, TrainError>)>(1);
            let (source, columns) = (source.clone(), columns.clone());
            let mine: Vec<usize> = order.iter().copied().skip(k).step_by(readers).collect();
            std::thread::spawn(move || {
                for i in mine {
                    if tx.send((i, source.read(i, &columns))).is_err() {
                        return;
                    }
                }
            });
            rx
        })
        .collect();
    let mut stopped = false;
    (0..order.len()).map_while(move |n| {
        if stopped {
            return None;
        }
        Some(receivers[n % readers].recv().unwrap_or_else(|_| {
            stopped = true;
            let chunk = order[n];
            let err = format!("the reader of chunk {chunk} stopped without a result (a panic)");
            (chunk, Err(TrainError::Internal(err)))
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Int8Array, Int16Array, StringArray, UInt16Array, UInt64Array};
    use lakefish_engine::random_games::{SplitMix, random_game};
    use shakmaty::Square;
    use std::sync::Arc;

    /// Chunks held in memory: rows of random games, some without a score or a result; the
    /// odd ones with packed boards in place of FENs (as shuffles write them now), the even
    /// ones with FENs (as before).
    struct Chunks(Vec<RecordBatch>);

    impl ChunkSource for Chunks {
        fn chunks(&self) -> usize {
            self.0.len()
        }
        fn name(&self, i: usize) -> String {
            format!("chunk-{i}")
        }
        /// The columns asked for, as a Parquet chunk gives them.
        fn read(&self, i: usize, columns: &[&str]) -> Result<RecordBatch, TrainError> {
            let b = &self.0[i];
            let mut names = columns.to_vec();
            if names.contains(&"board") && b.column_by_name("board").is_none() {
                names.push("fen");
            }
            let keep: Vec<usize> = (0..b.num_columns())
                .filter(|&c| names.contains(&b.schema().field(c).name().as_str()))
                .collect();
            Ok(b.project(&keep).unwrap())
        }
    }

    fn chunks(rows_per_chunk: &[usize]) -> Chunks {
        let mut rng = SplitMix(7);
        let mut game = 0;
        let mut played = Vec::new().into_iter();
        let batches = rows_per_chunk
            .iter()
            .enumerate()
            .map(|(chunk, &n)| {
                let (mut fen, mut mv, mut score, mut result) = (vec![], vec![], vec![], vec![]);
                for _ in 0..n {
                    let m = played.next().unwrap_or_else(|| {
                        game += 1;
                        played = random_game(game, 60).into_iter();
                        played.next().expect("a first move")
                    });
                    fen.push(m.fen);
                    mv.push(m.uci);
                    let r = rng.next_u64();
                    // Chunks 3 and 4 have every cell (the loader's column-wise path), the
                    // others some empty scores and results.
                    let full = chunk >= 3;
                    score.push((full || !r.is_multiple_of(7)).then_some((r % 2001) as i16 - 1000));
                    result.push((full || !r.is_multiple_of(11)).then_some((r % 3) as i8 - 1));
                }
                let rows = fen.len();
                let columns: Vec<ArrayRef> = vec![
                    Arc::new(StringArray::from(fen)),
                    Arc::new(Int16Array::from(score)),
                    Arc::new(StringArray::from(mv)),
                    Arc::new(Int8Array::from(result)),
                    Arc::new(UInt16Array::from(vec![20u16; rows])),
                    Arc::new(UInt64Array::from(vec![1u64; rows])),
                ];
                let b =
                    RecordBatch::try_new(lakefish_schemas::positions::schema(), columns).unwrap();
                match chunk % 2 {
                    1 => lakefish_jobs::shuffle::with_boards(b, "test").unwrap(),
                    _ => b,
                }
            })
            .collect();
        Chunks(batches)
    }

    /// The batches row by row, the plain way: every usable row appended in chunk order.
    fn reference(
        c: &Chunks,
        order: &[usize],
        features: FeatureSetKind,
        options: &RowOptions,
        batch_size: usize,
        skip: usize,
    ) -> Vec<Batch> {
        let (filter, mirror, partial_last) = (
            options.filter.as_ref(),
            options.mirror,
            options.partial_last,
        );
        let mut rows = Vec::new();
        // The mirroring rule of `Mirror::chosen`, written out again from its description.
        let picked = |seed: u64, chunk: &str, row: usize| {
            let mut h: u64 = 0xcbf29ce484222325;
            for b in chunk.as_bytes() {
                h ^= *b as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
            let mut z = h ^ seed ^ (row as u64).wrapping_mul(0x9e3779b97f4a7c15);
            z = z.wrapping_add(0x9e3779b97f4a7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            z ^= z >> 31;
            (z >> 11) as f64 / 9007199254740992.0
        };
        for &i in order {
            let b = &c.0[i];
            let fens = chunk_fens(b).unwrap();
            let fen = StringArray::from(fens);
            let score = column::<Int16Array>(b, "score").unwrap();
            let result = column::<Int8Array>(b, "result").unwrap();
            let mv = column::<StringArray>(b, "move").unwrap();
            let ply = column::<UInt16Array>(b, "ply").unwrap();
            for r in 0..b.num_rows() {
                if score.is_null(r) || result.is_null(r) {
                    continue;
                }
                if let Some(def) = filter
                    && !keep_row(
                        def,
                        fen.value(r),
                        mv.value(r),
                        Some(score.value(r)),
                        ply.value(r),
                    )
                    .unwrap()
                {
                    continue;
                }
                let mirror = match mirror {
                    Mirror::None => false,
                    Mirror::All => true,
                    Mirror::Fraction { fraction, seed } => {
                        picked(seed, &format!("chunk-{i}"), r) < fraction
                    }
                };
                // Mirrored independently of shakmaty: each rank's text reversed.
                let text = match mirror {
                    false => fen.value(r).to_string(),
                    true => {
                        let (placement, rest) = fen.value(r).split_once(' ').unwrap();
                        let ranks: Vec<String> = placement
                            .split('/')
                            .map(|rank| rank.chars().rev().collect())
                            .collect();
                        format!("{} {rest}", ranks.join("/"))
                    }
                };
                let (board, turn) = parse_fen_board(&text).unwrap();
                // Listed man by man in ascending square order of the board as stored (not
                // mirrored), each through `index` on the (mirrored) board.
                let (stored, _) = parse_fen_board(fen.value(r)).unwrap();
                let list = |perspective: Color| -> Vec<u32> {
                    let king = board.king_of(perspective).unwrap_or(Square::A1);
                    stored
                        .occupied()
                        .into_iter()
                        .filter_map(|sq| {
                            let piece = stored.piece_at(sq).unwrap();
                            let sq = if mirror { sq.flip_horizontal() } else { sq };
                            features.index(perspective, king, piece, sq)
                        })
                        .collect()
                };
                let (stm, nstm) = (list(turn), list(turn.other()));
                rows.push((
                    stm,
                    nstm,
                    score.value(r) as f32,
                    (result.value(r) as f32 + 1.0) / 2.0,
                    material(&board, turn),
                ));
            }
        }
        let batches = if partial_last {
            rows.len().div_ceil(batch_size)
        } else {
            rows.len() / batch_size
        };
        (skip..batches)
            .map(|k| {
                let mut b = Batch::default();
                let end = ((k + 1) * batch_size).min(rows.len());
                for (stm, nstm, score, result, material) in &rows[k * batch_size..end] {
                    b.push_features(stm, nstm);
                    *b.score.last_mut().unwrap() = *score;
                    *b.result.last_mut().unwrap() = *result;
                    *b.material.last_mut().unwrap() = *material;
                }
                b
            })
            .collect()
    }

    #[test]
    fn batches_equal_the_rows_appended_one_by_one() {
        // Chunks smaller and larger than a decoding piece, and an empty one.
        let c = Arc::new(chunks(&[5000, 37, 0, 2100, 900]));
        let order = vec![3, 0, 4, 2, 1];
        let quiet = MaskDefinition::quiet();
        let limited = MaskDefinition {
            max_abs_score: Some(300),
            ..MaskDefinition::quiet()
        };
        // Packed boards (the loader) decide the material rules as FENs (the reference) do.
        let material = MaskDefinition {
            rules: vec![
                lakefish_schemas::MaskRule::EarlySkip { plies: 3 },
                lakefish_schemas::MaskRule::SimpleEvalSkip { below: 200 },
            ],
            ..MaskDefinition::quiet()
        };
        for features in [FeatureSetKind::All768, FeatureSetKind::HalfKp] {
            for filter in [None, Some(&quiet), Some(&limited), Some(&material)] {
                let half = Mirror::Fraction {
                    fraction: 0.5,
                    seed: 9,
                };
                for (batch_size, skip, mirror) in [
                    (1, 0, Mirror::None),
                    (7, 3, Mirror::All),
                    (100, 0, half),
                    (2048, 1, Mirror::All),
                    (4096, 0, Mirror::None),
                ] {
                    let options = RowOptions {
                        filter: filter.cloned(),
                        mirror,
                        // Material only when asked for (both ways across the cases).
                        material: mirror != Mirror::All,
                        // Validation's shorter last batch, across the cases.
                        partial_last: batch_size >= 100,
                    };
                    let mut want = reference(&c, &order, features, &options, batch_size, skip);
                    if !options.material {
                        want.iter_mut().for_each(|b| b.material.clear());
                    }
                    for threads in [1, 3, 8, 16] {
                        let mut stream = stream_batches(
                            c.clone(),
                            order.clone(),
                            features,
                            options.clone(),
                            batch_size,
                            skip,
                            threads,
                        );
                        let mut got = Vec::new();
                        while let Some(b) = stream.next() {
                            let b = b.unwrap();
                            got.push(b.clone());
                            // Reused buffers must not leak rows into later batches.
                            stream.give_back(b);
                        }
                        assert_eq!(
                            got.len(),
                            want.len(),
                            "{features:?} b{batch_size} skip {skip} t{threads}"
                        );
                        assert!(
                            got == want,
                            "{features:?} b{batch_size} skip {skip} t{threads}"
                        );
                    }
                }
            }
        }
    }

    /// A source whose chunk 1 panics when read.
    struct Panicky(Chunks);

    impl ChunkSource for Panicky {
        fn chunks(&self) -> usize {
            self.0.chunks()
        }
        fn name(&self, i: usize) -> String {
            self.0.name(i)
        }
        fn read(&self, i: usize, columns: &[&str]) -> Result<RecordBatch, TrainError> {
            assert_ne!(i, 1, "chunk 1 cannot be read");
            self.0.read(i, columns)
        }
    }

    #[test]
    fn a_reader_that_dies_is_an_error_not_the_end_of_the_data() {
        for threads in [1, 8] {
            let source = Arc::new(Panicky(chunks(&[300, 300, 300])));
            let results: Vec<_> = stream_batches(
                source,
                vec![0, 1, 2],
                FeatureSetKind::All768,
                RowOptions::default(),
                16,
                0,
                threads,
            )
            .collect();
            let err = results
                .last()
                .and_then(|r| r.as_ref().err())
                .unwrap_or_else(|| panic!("threads {threads}: no error at the end"));
            assert!(err.to_string().contains("chunk 1"), "{err}");
            assert!(results.iter().rev().skip(1).all(|r| r.is_ok()));
        }
    }

    #[test]
    fn a_bad_fen_names_its_chunk_and_row() {
        let mut c = chunks(&[300]);
        let b = &c.0[0];
        let mut fens: Vec<String> = (0..b.num_rows())
            .map(|i| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap()
                    .value(i)
                    .to_string()
            })
            .collect();
        let bad = (0..fens.len())
            .find(|&i| b.column(1).is_valid(i) && b.column(3).is_valid(i))
            .unwrap();
        fens[bad] = "not a fen w - - 0 1".into();
        let mut columns = b.columns().to_vec();
        columns[0] = Arc::new(StringArray::from(fens));
        c.0[0] = RecordBatch::try_new(b.schema(), columns).unwrap();
        let msg = first_error(c, 0, FeatureSetKind::All768);
        assert!(
            msg.contains("chunk-0") && msg.contains(&format!("row {bad}:")),
            "{msg}"
        );
    }

    /// The error that streaming chunk `chunk` of `c` ends with.
    fn first_error(c: Chunks, chunk: usize, features: FeatureSetKind) -> String {
        stream_batches(
            Arc::new(c),
            vec![chunk],
            features,
            RowOptions::default(),
            16,
            0,
            2,
        )
        .find_map(|b| b.err())
        .expect("an error")
        .to_string()
    }

    /// A damaged packed board (a piece code that is no piece) is an error naming the chunk,
    /// the row and the board, never a panic or a silently wrong position.
    #[test]
    fn a_damaged_packed_board_names_its_chunk_and_row() {
        use arrow_array::FixedSizeBinaryArray;
        let mut c = chunks(&[10, 300]);
        let b = &c.0[1];
        let col = b.schema().index_of("board").unwrap();
        let boards = b
            .column(col)
            .as_any()
            .downcast_ref::<FixedSizeBinaryArray>()
            .unwrap();
        let bad = (0..b.num_rows())
            .find(|&i| b.column(1).is_valid(i) && b.column(3).is_valid(i))
            .unwrap();
        let cells: Vec<Vec<u8>> = (0..b.num_rows())
            .map(|i| {
                let mut cell = boards.value(i).to_vec();
                if i == bad {
                    cell[8] = 0x77;
                }
                cell
            })
            .collect();
        let mut columns = b.columns().to_vec();
        columns[col] = Arc::new(FixedSizeBinaryArray::try_from_iter(cells.into_iter()).unwrap());
        c.0[1] = RecordBatch::try_new(b.schema(), columns).unwrap();
        let msg = first_error(c, 1, FeatureSetKind::HalfKp);
        assert!(
            msg.contains("chunk-1")
                && msg.contains(&format!("row {bad}:"))
                && msg.contains("packed board"),
            "{msg}"
        );
    }
}
