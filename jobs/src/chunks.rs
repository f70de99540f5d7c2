//! Reading a committed shuffle's chunks back as text rows (`lakefish chunk`, profiles and
//! exports of a shuffle, the trainer's tests): the FEN unpacked from each row's packed board.

use arrow_array::RecordBatch;
use lakefish_schemas::names::ShuffleId;

use crate::shuffle::{corrupt, read_shuffle_manifest, shuffle_prefix};
use crate::{JobContext, JobError};

/// One row of a shuffle chunk as text: the FEN from its packed board (or, in a chunk from
/// before packed boards, its FEN column), and the row's other cells.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChunkRow {
    pub fen: String,
    pub score: Option<i16>,
    pub result: Option<i8>,
    pub ply: u16,
    #[serde(rename = "move")]
    pub mv: String,
    pub game_id: u64,
    /// Whether `fen` was decoded from a packed board.
    pub packed: bool,
}

/// The first `limit` rows of chunk `index` of committed shuffle `id`.
pub fn chunk_rows_as_text(
    ctx: &JobContext,
    id: &ShuffleId,
    index: u32,
    limit: usize,
) -> Result<Vec<ChunkRow>, JobError> {
    let m = ctx
        .block_on(read_shuffle_manifest(&ctx.lake, id))?
        .ok_or_else(|| JobError::Input {
            input: id.to_string(),
            reason: "no such shuffle (no committed manifest)".into(),
        })?;
    let chunk = m
        .chunks
        .get(index as usize)
        .ok_or_else(|| JobError::Input {
            input: id.to_string(),
            reason: format!(
                "no chunk {index}: the shuffle has {} chunks",
                m.chunks.len()
            ),
        })?;
    read_chunk_rows(ctx, id, &chunk.name, limit)
}

/// The first `limit` rows of the chunk file `name` of shuffle `id` (a missing file is named).
pub fn read_chunk_rows(
    ctx: &JobContext,
    id: &ShuffleId,
    name: &str,
    limit: usize,
) -> Result<Vec<ChunkRow>, JobError> {
    use arrow_array::{
        Array, FixedSizeBinaryArray, Int8Array, Int16Array, StringArray, UInt16Array, UInt64Array,
    };
    use lakefish_schemas::positions::{
        COL_BOARD, COL_FEN, COL_GAME_ID, COL_MOVE, COL_PLY, COL_RESULT, COL_SCORE,
    };
    ctx.check_cancelled()?;
    let key = format!("{}/{name}", shuffle_prefix(id));
    let bytes = ctx
        .block_on(ctx.lake.get(&key))?
        .ok_or_else(|| corrupt("shuffle chunk", &key, "missing"))?;
    let batch = lakefish_lake::parts::read_chunk(
        bytes,
        &[
            COL_BOARD,
            COL_SCORE,
            COL_RESULT,
            COL_PLY,
            COL_MOVE,
            COL_GAME_ID,
        ],
    )
    .map_err(|e| corrupt("shuffle chunk", &key, e))?;
    fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str, key: &str) -> Result<&'a T, JobError> {
        b.column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<T>())
            .ok_or_else(|| {
                corrupt(
                    "shuffle chunk",
                    key,
                    format!("column {name} missing or of the wrong type"),
                )
            })
    }
    let boards = batch
        .column_by_name(COL_BOARD)
        .map(|_| col::<FixedSizeBinaryArray>(&batch, COL_BOARD, &key))
        .transpose()?;
    let fens = match boards {
        Some(_) => None,
        None => Some(col::<StringArray>(&batch, COL_FEN, &key)?),
    };
    let score = col::<Int16Array>(&batch, COL_SCORE, &key)?;
    let result = col::<Int8Array>(&batch, COL_RESULT, &key)?;
    let ply = col::<UInt16Array>(&batch, COL_PLY, &key)?;
    let mv = col::<StringArray>(&batch, COL_MOVE, &key)?;
    let game = col::<UInt64Array>(&batch, COL_GAME_ID, &key)?;
    (0..batch.num_rows().min(limit))
        .map(|i| {
            let fen = match (boards, fens) {
                (Some(b), _) => lakefish_engine::packed_board::from_bytes(b.value(i))
                    .and_then(lakefish_engine::packed_board::unpack_fen)
                    .map_err(|e| corrupt("shuffle chunk", &key, format!("row {i}: {e}")))?,
                (None, Some(f)) => f.value(i).to_string(),
                (None, None) => unreachable!("one of the two columns was found"),
            };
            Ok(ChunkRow {
                fen,
                score: score.is_valid(i).then(|| score.value(i)),
                result: result.is_valid(i).then(|| result.value(i)),
                ply: ply.value(i),
                mv: mv.value(i).to_string(),
                game_id: game.value(i),
                packed: boards.is_some(),
            })
        })
        .collect()
}
