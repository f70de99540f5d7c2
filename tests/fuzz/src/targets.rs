//! One target per parser that reads bytes from outside. Each builds its seeds itself (the
//! crates' own writers and generators), adds `../shared` samples when they are there, and
//! checks what the parser promises: no panic, no hang, and an error that names where the
//! input went wrong (byte offset, entry, line, game, ply, tensor, field).

use crate::harness::{Target, Verdict, panics_elsewhere};
use crate::mutate::{INTERESTING_NUMBERS, Rng};
use lakefish_engine::book::{Book, BookError};
use lakefish_engine::eval::Evaluator;
use lakefish_engine::features::FeatureSetKind;
use lakefish_engine::nnue::{Arch, Network, NnueError, arch_hash, random_network};
use lakefish_engine::rules::{RulesError, check_move, move_facts, parse_position};
use lakefish_engine::simd::Kernel;
use lakefish_engine::uci::Session;
use lakefish_ingest::binpack::{ChunkScanner, ScanItem, decode_chunk, synthetic_binpack};
use lakefish_ingest::pgn::{
    BLOCK_BYTES, BlockSplitter, Eval, TooLongGame, parse_block, parse_eval, synthetic_pgn,
};
use lakefish_lake::input::Input;
use lakefish_schemas::config::{Config, ConfigError};
use lakefish_schemas::sprt::parse_tc;
use lakefish_schemas::{JobId, JobSpec, QueuedJob, SpecError};
use serde_json::Value;
use shakmaty::fen::Fen;
use shakmaty::{CastlingMode, Chess, EnPassantMode, Position};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex, OnceLock};

/// Every target, in a fixed order.
pub fn all() -> Vec<Target> {
    vec![
        binpack_chunk(),
        binpack_scan(),
        pgn_block(),
        pgn_eval(),
        pgn_splitter(),
        nnue(),
        nnue_described(),
        layout_document(),
        layout_file(),
        layout_file_lakefish(),
        uci(),
        fen(),
        book(),
        job_spec(),
        sprt_tc(),
        config(),
        crate::engine_targets::sprt_side(),
        crate::engine_targets::uci_info(),
    ]
}

/// The target called `name`.
pub fn by_name(name: &str) -> Option<Target> {
    all().into_iter().find(|t| t.name == name)
}

fn shared(rel: &str) -> Option<Vec<u8>> {
    std::fs::read(lakefish_testkit::shared_data(rel)?).ok()
}

fn words(list: &[&str]) -> Vec<Vec<u8>> {
    list.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

// ---------------------------------------------------------------- binpack

/// What `decode_chunk` promises: each error names the entry, or is about the chunk as a whole
/// (the caller adds the chunk's byte offset).
fn check_chunk_error(e: &str) -> Result<(), String> {
    if e.starts_with("entry ") || e.contains(" at entry ") || e == "chunk holds no complete entry" {
        Ok(())
    } else {
        Err(format!("chunk error names no entry: {e:?}"))
    }
}

fn decode_checked(data: &[u8], offset: u64) -> Result<Verdict, String> {
    match decode_chunk(data, 0x5eed, offset) {
        Ok(cols) => {
            let n = cols.rows();
            let lens = [
                cols.fen_ends.len(),
                cols.move_ends.len(),
                cols.score.len(),
                cols.result.len(),
                cols.ply.len(),
                cols.game_id.len(),
            ];
            if n == 0 || lens.iter().any(|&l| l != n) {
                return Err(format!(
                    "decoded columns disagree: {n} rows, lengths {lens:?}"
                ));
            }
            Ok(Verdict::Accepted)
        }
        Err(e) => check_chunk_error(&e).map(|()| Verdict::Refused),
    }
}

fn binpack_chunk() -> Target {
    let mut seeds: Vec<Vec<u8>> = (0..3)
        .map(|s| synthetic_binpack(2, s)[8..].to_vec())
        .collect();
    if let Some(b) = shared("binpack/ep1.binpack") {
        seeds.push(b[8.min(b.len())..].to_vec());
    }
    if let Some(b) = shared("binpack/small.binpack") {
        // A prefix: decoding stops at the first incomplete entry.
        seeds.push(b[8..b.len().min(4096)].to_vec());
    }
    Target {
        name: "binpack_chunk",
        seeds,
        dict: Vec::new(),
        text: false,
        structured: None,
        max_len: 16 << 10,
        check: Box::new(|data| decode_checked(data, 4096)),
    }
}

fn binpack_scan() -> Target {
    let one = synthetic_binpack(1, 9);
    let mut seeds = vec![
        one.clone(),
        [one.clone(), synthetic_binpack(1, 3), one].concat(),
    ];
    if let Some(b) = shared("binpack/ep1.binpack") {
        seeds.push([b.clone(), b].concat());
    }
    let scratch = Mutex::new(tempfile::NamedTempFile::new().expect("a scratch file"));
    Target {
        name: "binpack_scan",
        seeds,
        dict: words(&["BINP"]),
        text: false,
        structured: None,
        max_len: 8 << 10,
        check: Box::new(move |data| {
            let scratch = scratch.lock().unwrap_or_else(|p| p.into_inner());
            let mut file = scratch.reopen().map_err(|e| e.to_string())?;
            file.set_len(0).map_err(|e| e.to_string())?;
            file.write_all(data).map_err(|e| e.to_string())?;
            let file = scratch.reopen().map_err(|e| e.to_string())?;
            let input = Input::from_file("fuzz.binpack", file).map_err(|e| e.to_string())?;
            let mut verdict = Verdict::Accepted;
            let mut end = 0u64;
            for item in ChunkScanner::new(&input) {
                match item.map_err(|e| format!("scanner I/O error: {e}"))? {
                    ScanItem::Chunk {
                        offset,
                        data: payload,
                    } => {
                        if offset != end {
                            return Err(format!("chunk at {offset}, expected {end}"));
                        }
                        end = offset + 8 + payload.len() as u64;
                        if decode_checked(&payload, offset)? == Verdict::Refused {
                            verdict = Verdict::Refused;
                        }
                    }
                    ScanItem::Skipped(r) => {
                        if r.offset != end || r.len == 0 {
                            return Err(format!("skipped range {r} does not follow {end}"));
                        }
                        if !r.reason.contains("byte offset") {
                            return Err(format!("skip reason names no byte offset: {r}"));
                        }
                        end = r.offset + r.len;
                        verdict = Verdict::Refused;
                    }
                }
            }
            if end != data.len() as u64 {
                return Err(format!("scan ended at {end} of {} bytes", data.len()));
            }
            Ok(verdict)
        }),
    }
}

// ---------------------------------------------------------------- PGN

const PGN_WORDS: [&str; 24] = [
    "[Event \"x\"]\n",
    "[FEN \"",
    "[SetUp \"1\"]",
    "[Variant \"Chess960\"]\n",
    "[Variant \"From Position\"]\n",
    "[Result \"1-0\"]\n\n",
    "[Site \"https://lichess.org/zzzzzzzz\"]\n",
    "[UTCDate \"2025.13.99\"]\n",
    "{ [%eval #-1000] }",
    "{ [%eval 1e308] }",
    "{ [%eval",
    "(",
    ")",
    "--",
    "Z0",
    "O-O-O",
    "0-0",
    "e8=Q+",
    "$255",
    "1/2-1/2",
    "\n\n",
    "%",
    ";",
    "\u{feff}",
];

fn pgn_seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = (0..3)
        .map(|s| synthetic_pgn(8, s, s == 1).0.into_bytes())
        .collect();
    seeds.push(
        b"[Variant \"Chess960\"]\n[FEN \"bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9\"]\n\n9. g3 O-O 10. O-O *\n"
            .to_vec(),
    );
    if let Some(p) = shared("pgn/lichess_db_10k.pgn") {
        seeds.push(p);
    }
    if let Some(p) = shared("pgn/twic1599_100k.pgn") {
        seeds.push(p[..p.len().min(12 << 10)].to_vec());
    }
    seeds
}

fn pgn_block() -> Target {
    Target {
        name: "pgn_block",
        seeds: pgn_seeds(),
        dict: words(&PGN_WORDS),
        text: true,
        structured: None,
        max_len: 64 << 10,
        check: Box::new(|data| {
            let out = parse_block(data, 0x5eed, 1 << 20);
            for (game, why) in &out.skipped {
                // The game number is the location; the reason says what (and the move).
                if *game >= out.games || why.is_empty() {
                    return Err(format!("skip of game {game} of {}: {why:?}", out.games));
                }
                if why.starts_with("move ") && !why.contains("(ply ") {
                    return Err(format!("illegal move error names no ply: {why}"));
                }
            }
            let mut games = 0;
            for (month, m) in &out.months {
                let c = &m.rows;
                let n = c.rows();
                let lens = [
                    c.move_ends.len(),
                    c.score.len(),
                    c.result.len(),
                    c.ply.len(),
                    c.game_id.len(),
                ];
                if lens.iter().any(|&l| l != n) {
                    return Err(format!("{month}: {n} rows, column lengths {lens:?}"));
                }
                games += m.games.len() as u64;
            }
            // Every game is kept, skipped once, or counted as a variant.
            let counted = games + out.skipped.len() as u64 + out.variants.values().sum::<u64>();
            if counted != out.games {
                return Err(format!(
                    "{} games: {games} kept, {} skipped, {:?} variants",
                    out.games,
                    out.skipped.len(),
                    out.variants
                ));
            }
            Ok(if out.skipped.is_empty() {
                Verdict::Accepted
            } else {
                Verdict::Refused
            })
        }),
    }
}

fn pgn_eval() -> Target {
    Target {
        name: "pgn_eval",
        seeds: words(&[
            " [%eval 0.23] [%clk 0:01:00] ",
            "[%eval -1.5,20]",
            "[%eval #-3]",
            "[%eval #1000]",
            "[%eval  12 ]",
        ]),
        dict: words(&["[%eval", "#", "-", ",", "]", "e", "inf", "NaN"]),
        text: true,
        structured: None,
        max_len: 4096,
        check: Box::new(|data| {
            let after_e4 = {
                let mut p = Chess::default();
                p.play_unchecked(p.legal_moves()[0]);
                p
            };
            match parse_eval(data) {
                None => Ok(Verdict::Refused),
                Some(Eval::Pawns(p)) if !p.is_finite() => Err(format!("pawns {p}")),
                Some(Eval::Mate(n)) if n.unsigned_abs() > 1000 => Err(format!("mate {n}")),
                Some(e) => {
                    e.to_internal(&Chess::default());
                    e.to_internal(&after_e4);
                    Ok(Verdict::Accepted)
                }
            }
        }),
    }
}

/// Hands out at most `step` bytes per read, then fails after `fail_at` bytes if set.
struct Trickle<'a> {
    data: &'a [u8],
    at: usize,
    step: usize,
    fail_at: Option<usize>,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.fail_at.is_some_and(|f| self.at >= f) {
            return Err(std::io::Error::other("injected read error"));
        }
        let limit = self.fail_at.unwrap_or(self.data.len()).min(self.data.len());
        let n = buf.len().min(self.step).min(limit - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn pgn_splitter() -> Target {
    Target {
        name: "pgn_splitter",
        seeds: pgn_seeds(),
        dict: words(&PGN_WORDS),
        text: true,
        structured: None,
        max_len: 64 << 10,
        check: Box::new(|data| {
            // The first byte picks the read pattern; odd lengths repeat the text past a block.
            let knob = data.first().copied().unwrap_or(0) as usize;
            let data = if data.len() % 16 == 1 {
                data.repeat(BLOCK_BYTES / data.len() + 2)
            } else {
                data.to_vec()
            };
            let fail_at = knob.is_multiple_of(3).then(|| knob * 7 % (data.len() + 1));
            // At most ~4 reads: each read grows the splitter's buffer by 1 MiB of zeros.
            let step = (1 + knob * 4099 % (1 << 21)).max(data.len() / 3 + 1);
            // Odd knobs: a game-length limit small enough to skip games (gaps in the blocks
            // must then be exactly the reported skips); even knobs: no limit.
            let max_game = if knob % 2 == 1 {
                64 + (knob as u64 * 37)
            } else {
                u64::MAX
            };
            let mut splitter = BlockSplitter::new(
                Trickle {
                    data: &data,
                    at: 0,
                    step,
                    fail_at,
                },
                max_game,
            );
            let bom = if data.starts_with(b"\xef\xbb\xbf") {
                3
            } else {
                0
            };
            let mut next = bom as u64;
            let mut skipped: Vec<TooLongGame> = Vec::new();
            // Advances `next` over reported skips up to `to`; anything else is a gap.
            let bridge = |next: &mut u64, skipped: &mut Vec<TooLongGame>, to: u64| {
                while *next < to {
                    let Some(i) = skipped.iter().position(|g| g.offset == *next) else {
                        return Err(format!("bytes {next}..{to} neither in a block nor skipped"));
                    };
                    let g = skipped.remove(i);
                    if g.len == 0 || g.len as usize > data.len() {
                        return Err(format!("skip of {} bytes at {}", g.len, g.offset));
                    }
                    *next += g.len;
                }
                if *next > to {
                    return Err(format!("a skip runs past {to} (to {next})"));
                }
                Ok(())
            };
            let check_block =
                |next: &mut u64, skipped: &mut Vec<TooLongGame>, at: u64, block: &[u8]| {
                    bridge(next, skipped, at)?;
                    if block.is_empty() {
                        return Err(format!("empty block at {at}"));
                    }
                    if data[at as usize..at as usize + block.len()] != block[..] {
                        return Err(format!("block at {at} is not the input's bytes"));
                    }
                    *next = at + block.len() as u64;
                    Ok::<_, String>(())
                };
            loop {
                let item = splitter.next_block();
                skipped.extend(splitter.take_too_long());
                match item {
                    Ok(Some((at, block))) => check_block(&mut next, &mut skipped, at, &block)?,
                    Ok(None) => {
                        let end = skipped.iter().map(|g| g.offset + g.len).max();
                        let end = end.unwrap_or(next).max(next);
                        bridge(&mut next, &mut skipped, end)?;
                        return if next == data.len() as u64 || data.len() <= bom {
                            Ok(Verdict::Accepted)
                        } else {
                            Err(format!("blocks end at {next} of {}", data.len()))
                        };
                    }
                    Err(_) => {
                        let (blocks, dropped) = splitter.salvage();
                        skipped.extend(splitter.take_too_long());
                        for (at, block) in blocks {
                            check_block(&mut next, &mut skipped, at, &block)?;
                        }
                        return if next + dropped <= data.len() as u64 {
                            Ok(Verdict::Refused)
                        } else {
                            Err(format!(
                                "salvage: {next} + {dropped} dropped > {}",
                                data.len()
                            ))
                        };
                    }
                }
            }
        }),
    }
}

// ---------------------------------------------------------------- .nnue

/// Recomputes the header's architecture hash when its feature set and architecture parse, so
/// mutants get past the hash check into the tensors.
fn nnue_fix_hash(rng: &mut Rng, data: &[u8]) -> Option<Vec<u8>> {
    let mut d = data.to_vec();
    let str16 = |at: usize| -> Option<(String, usize)> {
        let n = u16::from_le_bytes(d.get(at..at + 2)?.try_into().ok()?) as usize;
        let s = std::str::from_utf8(d.get(at + 2..at + 2 + n)?).ok()?;
        Some((s.to_string(), at + 2 + n))
    };
    let (features, at) = str16(16)?;
    let (mut arch, end) = str16(at)?;
    if rng.chance(3) {
        // Another architecture: the tensors' shapes no longer fit.
        arch = format!("{}x2-{}", 1 + rng.below(8), 1 + rng.below(8));
        let mut len = (arch.len() as u16).to_le_bytes().to_vec();
        len.extend_from_slice(arch.as_bytes());
        d.splice(at..end, len);
    }
    let kind = FeatureSetKind::from_name(&features).ok()?;
    let arch = Arch::parse(&arch).ok()?;
    d[12..16].copy_from_slice(&arch_hash(kind, &arch).to_le_bytes());
    Some(d)
}

fn nnue() -> Target {
    let seeds = vec![
        random_network(FeatureSetKind::All768, "4x2-4", 1).to_bytes(),
        random_network(FeatureSetKind::All768, "1x2", 2).to_bytes(),
        random_network(FeatureSetKind::All768, "32x2-8-8", 3).to_bytes(),
        random_network(FeatureSetKind::HalfKaV2Hm, "1x2-1", 4).to_bytes(),
        random_network(FeatureSetKind::HalfKp, "1x2", 5).to_bytes(),
    ];
    Target {
        name: "nnue",
        seeds,
        dict: words(&[
            "LKFNNUE\n",
            "all768",
            "halfkp",
            "halfka_v2_hm",
            "x2",
            "ft.bias",
            "l0.weight",
        ]),
        text: false,
        structured: Some(nnue_fix_hash),
        max_len: 128 << 10,
        check: Box::new(|data| match Network::from_bytes(data) {
            Ok(net) => {
                if net.to_bytes() != data {
                    return Err("a net read back writes other bytes".into());
                }
                let mut pos = Chess::default();
                for _ in 0..3 {
                    let acc = net.refresh(pos.board()).map_err(|e| e.to_string())?;
                    let (stm, nstm) = (&acc.values[1], &acc.values[0]);
                    let want = net.propagate(stm, nstm);
                    for kernel in Kernel::available(net.arch.l1) {
                        let got = net.propagate_with(kernel, stm, nstm);
                        if got != want {
                            return Err(format!("{kernel:?} gives {got}, scalar {want}"));
                        }
                    }
                    let m = pos.legal_moves()[0];
                    pos.play_unchecked(m);
                }
                Ok(Verdict::Accepted)
            }
            Err(e) => {
                let located = match &e {
                    NnueError::Truncated { what, .. } => !what.is_empty(),
                    NnueError::Tensor { name, .. } => !name.is_empty(),
                    _ => true,
                };
                let shown = e.to_string();
                let names_place = [
                    "magic", "version", "hash", "byte", "tensor", "header", "trailing",
                ]
                .iter()
                .any(|w| shown.contains(w));
                if located && names_place {
                    Ok(Verdict::Refused)
                } else {
                    Err(format!(".nnue error names no place: {shown}"))
                }
            }
        }),
    }
}

/// `.nnue` version 2 (nets a NetSpec describes): a file read back writes the same bytes and
/// evaluates alike on every kernel, incrementally and from scratch; a refusal names where.
fn nnue_described() -> Target {
    use lakefish_engine::spec_net::{SpecNet, random_spec_net};
    use lakefish_schemas::netspec::NetSpec;
    let spec = |text: &str| NetSpec::parse(text).expect("a seed's description");
    let layout = "[0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9]";
    let seeds = [
        "version = 1\n[inputs]\nfamily = \"piece_square\"\n[transformer]\nwidth = 4\n\
         activation = \"screlu\"\n[quantization]\neval_scale = 400.0\n"
            .to_string(),
        format!(
            "version = 1\n[inputs]\nfamily = \"king_buckets\"\nmirror = true\nlayout = {layout}\n\
             [transformer]\nwidth = 8\nactivation = \"pairwise_crelu\"\n[[layers]]\nwidth = 2\n\
             activation = \"crelu\"\nper_bucket = true\n[output_buckets]\nrule = \"material_count\"\n\
             count = 4\n[quantization]\neval_scale = 400.0\n\
             tensors.\"out.weight\" = {{ dtype = \"f32\", factor = 1.0 }}\n"
        ),
    ]
    .iter()
    .enumerate()
    .map(|(i, t)| random_spec_net(spec(t), i as u64).unwrap().to_bytes())
    .collect();
    Target {
        name: "nnue_described",
        seeds,
        dict: words(&[
            "LKFNNUE\n",
            "\"king_buckets\"",
            "\"layout\"",
            "\"width\"",
            "ft.weight",
            "out.bias",
            "\"f32\"",
            "\"layers\"",
        ]),
        text: false,
        structured: None,
        max_len: 128 << 10,
        check: Box::new(|data| match SpecNet::from_bytes(data) {
            Ok(net) => {
                if net.to_bytes() != data {
                    return Err("a described net read back writes other bytes".into());
                }
                let mut stack = lakefish_engine::eval::EvalStack::new(
                    Evaluator::Spec(Arc::new(net.clone())),
                    4,
                );
                let mut pos = Chess::default();
                stack.reset(&pos);
                for ply in 0..3 {
                    let m = pos.legal_moves()[0];
                    let turn = pos.turn();
                    pos.play_unchecked(m);
                    stack.push(ply, turn, m, &pos);
                    let want = net
                        .evaluate_board(pos.board(), pos.turn())
                        .map_err(|e| e.to_string())?;
                    let acc = net.refresh(pos.board()).map_err(|e| e.to_string())?;
                    let (stm, nstm) =
                        (&acc[pos.turn() as usize], &acc[pos.turn().other() as usize]);
                    let men = pos.board().occupied().count() as u32;
                    for kernel in Kernel::available(net.width) {
                        let got = net.evaluate(kernel, stm, nstm, men);
                        if got != want {
                            return Err(format!("{kernel:?} gives {got}, scalar {want}"));
                        }
                    }
                    let incremental = stack.evaluate(ply + 1, &pos);
                    let bound = lakefish_engine::scores::MAX_EVAL;
                    if incremental != want.clamp(-bound, bound) {
                        return Err(format!("incremental {incremental}, refresh {want}"));
                    }
                }
                Ok(Verdict::Accepted)
            }
            Err(e) => {
                let shown = e.to_string();
                let names_place = [
                    "magic",
                    "version",
                    "description",
                    "comment",
                    "byte",
                    "tensor",
                    "trailing",
                    "header",
                ]
                .iter()
                .any(|w| shown.contains(w));
                if names_place {
                    Ok(Verdict::Refused)
                } else {
                    Err(format!("described .nnue error names no place: {shown}"))
                }
            }
        }),
    }
}

// ---------------------------------------------------------------- saved layouts

/// A layout document (TOML or JSON): refused naming the field, or read and valid.
fn layout_document() -> Target {
    use lakefish_schemas::layout::{Layout, SHIPPED};
    let mut seeds: Vec<Vec<u8>> = SHIPPED.iter().map(|(_, t)| t.as_bytes().to_vec()).collect();
    seeds.push(
        serde_json::to_vec(&Layout::parse(SHIPPED[3].1).unwrap()).expect("a layout serializes"),
    );
    seeds.push(b"version = 1\nheader = [{ text = \"NNUE\" }, { u32 = 7 }]\n[[tensors]]\nid = \"a\"\ntensor = \"ft.weight\"\ndtype = \"i16\"\nfactor = 255.0\n".to_vec());
    Target {
        name: "layout_document",
        seeds,
        dict: words(&[
            "[[tensors]]\n",
            "transpose = true\n",
            "merge = [\"ft.factoriser\"]\n",
            "padding = { multiple = 64, bytes = \"bullet\" }\n",
            "dtype = \"f32\"",
            "factor = ",
            "header",
            "u32 = ",
            "rounding = \"trunc\"",
            "{ spec = \"u32\" }",
            "{ tensor_count = \"u32\" }",
            "[rest]\nrecord = \"lakefish\"\n",
            "\"",
            "[",
            "{",
        ]),
        text: true,
        structured: None,
        max_len: 16 << 10,
        check: Box::new(|data| match Layout::parse(&text(data)) {
            Ok(layout) => {
                layout
                    .validate()
                    .map_err(|e| format!("parse accepted an invalid layout: {e}"))?;
                // What it writes before the tensors is what it promised.
                let _ = layout.header_bytes(&lakefish_schemas::layout::HeaderValues {
                    description: b"a description",
                    spec: b"{}",
                    tensors: 3,
                });
                Ok(Verdict::Accepted)
            }
            Err(e) if !e.field.is_empty() && !e.reason.is_empty() => Ok(Verdict::Refused),
            Err(e) => Err(format!("a layout error names no field: {e:?}")),
        }),
    }
}

/// A file read through bullet's 3_input_buckets layout as a small net of that shape: refused
/// naming what differs (size, header, padding, a tensor's value), or read, and then written
/// back byte for byte.
fn layout_file() -> Target {
    layout_file_target("layout_file", 2, 2)
}

/// The same through lakefish's own layout (a header with the NetSpec and tensor count, a
/// record before each tensor) as bullet's 4_multi_layer net: lakefish's `.nnue` read as data.
fn layout_file_lakefish() -> Target {
    let lakefish = lakefish_schemas::layout::SHIPPED
        .iter()
        .position(|(n, _)| *n == "lakefish")
        .expect("the lakefish layout ships");
    layout_file_target("layout_file_lakefish", lakefish, 3)
}

/// Files of the shipped layout `layout` for shipped net `net` made 4 wide.
fn layout_file_target(name: &'static str, layout: usize, net: usize) -> Target {
    use lakefish_engine::layout::{NetTensors, read, write};
    use lakefish_engine::spec_net::random_spec_net;
    use lakefish_schemas::layout::{Layout, SHIPPED, SHIPPED_NETS};
    use lakefish_schemas::netspec::NetSpec;
    let spec = {
        let mut s = NetSpec::parse(SHIPPED_NETS[net].1).expect("a shipped net");
        s.transformer.width = 4;
        s
    };
    let layout = Layout::parse(SHIPPED[layout].1).expect("a shipped layout");
    let seeds = (0..3)
        .map(|i| {
            let net = random_spec_net(spec.clone(), i).unwrap();
            write(&NetTensors::of_spec_net(&net), &layout).unwrap()
        })
        .collect();
    Target {
        name,
        seeds,
        dict: words(&["bullet", "\u{7f}\u{7f}", "\u{0}\u{80}"]),
        text: false,
        structured: None,
        max_len: 128 << 10,
        check: Box::new(move |data| match read(data, &layout, spec.clone()) {
            Ok(tensors) => {
                let again = write(&tensors, &layout).map_err(|e| e.to_string())?;
                if again != data {
                    return Err("a file read through a layout writes other bytes".into());
                }
                let net = tensors.into_spec_net().map_err(|e| e.to_string())?;
                net.evaluate_board(&shakmaty::Board::default(), shakmaty::Color::White)
                    .map_err(|e| e.to_string())?;
                Ok(Verdict::Accepted)
            }
            Err(e) => {
                let shown = e.to_string();
                if ["layout:", "tensor "].iter().any(|w| shown.starts_with(w)) {
                    Ok(Verdict::Refused)
                } else {
                    Err(format!("a layout file's error names no place: {shown}"))
                }
            }
        }),
    }
}

// ---------------------------------------------------------------- UCI

fn tiny_net() -> Arc<Network> {
    static NET: OnceLock<Arc<Network>> = OnceLock::new();
    NET.get_or_init(|| Arc::new(random_network(FeatureSetKind::All768, "8x2-8", 1)))
        .clone()
}

/// Output collected in memory.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The script the session reads: every `go` is followed by `stop` (a fuzzed `go infinite` is
/// not a hang), and `Hash` sizes are kept small (the engine refuses sizes beyond available
/// memory, but a fuzzed 10 GiB table would still cost the run seconds to fill).
fn uci_script(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 64);
    for line in data.split(|&b| b == b'\n') {
        let text = String::from_utf8_lossy(line);
        let mut words = text.split_whitespace();
        let first = words.next();
        if first == Some("setoption") && text.to_ascii_lowercase().contains("hash") {
            out.extend_from_slice(b"setoption name Hash value 1\n");
            continue;
        }
        out.extend_from_slice(line);
        out.push(b'\n');
        if first == Some("go") {
            out.extend_from_slice(b"stop\n");
        }
    }
    out
}

fn uci() -> Target {
    let seeds = words(&[
        "uci\nisready\nposition startpos moves e2e4 e7e5 g1f3\ngo depth 3\neval\nquit\n",
        "position fen r3k2r/8/8/3pP3/8/8/8/R3K2R w KQkq d6 0 1 moves e5d6 e8c8\ngo nodes 500\n",
        "setoption name UCI_Chess960 value true\nposition fen bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9 moves g1h1\ngo depth 2\n",
        "setoption name EvalFile value tiny\nposition startpos\ngo wtime 1000 btime 1000 winc 10 binc 10 movestogo 30\neval\n",
        "go infinite\nstop\ngo movetime 50\nucinewgame\nposition fen 6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1\ngo mate 1\n",
        "setoption name Hash value 2\nsetoption name EvalFile value material\ngo depth 2 nodes 300\n",
    ]);
    Target {
        name: "uci",
        seeds,
        dict: words(&[
            "position",
            "startpos",
            "fen",
            "moves",
            "go",
            "depth",
            "nodes",
            "movetime",
            "wtime",
            "btime",
            "winc",
            "binc",
            "movestogo",
            "mate",
            "infinite",
            "ponder",
            "searchmoves",
            "setoption",
            "name",
            "value",
            "EvalFile",
            "UCI_Chess960",
            "tiny",
            "classical",
            "ucinewgame",
            "isready",
            "eval",
            "stop",
            "quit",
            "0000",
            "e1g1",
            "a7a8q",
            "e8c8",
        ]),
        text: true,
        structured: None,
        max_len: 4096,
        check: Box::new(|data| {
            let buf = Buf::default();
            let session = Session::new(
                buf.clone(),
                Evaluator::Classical,
                "classical",
                Box::new(|v| match v {
                    "classical" => Ok(Evaluator::Classical),
                    "material" => Ok(Evaluator::Material),
                    "tiny" => Ok(Evaluator::Nnue(tiny_net())),
                    _ => Err(format!("no net {v:?}")),
                }),
            );
            let before = panics_elsewhere();
            session.run(uci_script(data).as_slice());
            if panics_elsewhere() != before {
                return Err("the search thread panicked (its message is above)".into());
            }
            let out = String::from_utf8(buf.0.lock().unwrap_or_else(|p| p.into_inner()).clone())
                .map_err(|_| "the engine wrote something that is not UTF-8".to_string())?;
            let mut verdict = Verdict::Accepted;
            for line in out.lines() {
                if let Some(e) = line.strip_prefix("info string error: ") {
                    verdict = Verdict::Refused;
                    let named = ["position", "go", "setoption", "unknown command"]
                        .iter()
                        .any(|c| e.starts_with(c));
                    if !named {
                        return Err(format!("error names no command: {line}"));
                    }
                }
            }
            Ok(verdict)
        }),
    }
}

// ---------------------------------------------------------------- FEN

fn fen() -> Target {
    let mut seeds = words(&[
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\ne2e4",
        "r3k2r/8/8/3pP3/8/8/8/R3K2R w KQkq d6 12 40\ne5d6",
        "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1\ne1c1",
        "4k3/P7/8/8/8/8/8/4K3 w - - 0 1\na7a8n",
        "bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9\na3a4",
        "8/8/8/8/8/8/8/k6K b - - 99 120\na1a2",
    ]);
    for g in 0..4 {
        for m in lakefish_engine::random_games::random_game(g, 120)
            .iter()
            .step_by(17)
        {
            seeds.push(format!("{}\n{}", m.fen, m.uci).into_bytes());
        }
    }
    if let Some(epd) = shared("epd/standard.epd") {
        for line in text(&epd).lines().take(40) {
            let fen: Vec<&str> = line.split_whitespace().take(4).collect();
            let fen = format!("{} 0 1", fen.join(" "));
            if let Ok(pos) = parse_position(&fen)
                && let Some(m) = pos.legal_moves().first()
            {
                let uci = shakmaty::uci::UciMove::from_move(*m, CastlingMode::Standard);
                seeds.push(format!("{fen}\n{uci}").into_bytes());
            }
        }
    }
    Target {
        name: "fen",
        seeds,
        dict: words(&[
            "/", "8", "K", "k", "KQkq", "HAha", "-", " w ", " b ", "e3", "99999",
        ]),
        text: true,
        structured: None,
        max_len: 512,
        check: Box::new(|data| {
            let t = text(data);
            let (fen, uci) = t.split_once('\n').unwrap_or((&t, "e2e4"));
            let fen_error = |e: RulesError| -> Result<Verdict, String> {
                let ok = match &e {
                    RulesError::Fen { reason, .. } => reason.starts_with("invalid "),
                    RulesError::Position { reason, .. } => !reason.is_empty(),
                    RulesError::Uci { uci: u } => u == uci,
                    RulesError::IllegalMove { uci: u, .. } => u == uci,
                };
                if ok {
                    Ok(Verdict::Refused)
                } else {
                    Err(format!("unlocated error: {e}"))
                }
            };
            let pos = match parse_position(fen) {
                Ok(p) => p,
                Err(e) => return fen_error(e),
            };
            // The fast writer must agree with shakmaty's, and its output must read back.
            let mut ours = Vec::new();
            lakefish_engine::fen::write_fen(&pos, &mut ours);
            let theirs = Fen::from_position(&pos, EnPassantMode::Legal).to_string();
            if ours != theirs.as_bytes() {
                return Err(format!(
                    "write_fen {:?} != shakmaty {theirs:?}",
                    text(&ours)
                ));
            }
            let again = parse_position(&theirs).map_err(|e| format!("written FEN refused: {e}"))?;
            if again != pos {
                return Err(format!("{theirs} reads back as another position"));
            }
            if let Ok(p960) = Fen::from_ascii(fen.as_bytes()).map_err(drop).and_then(|f| {
                f.into_position::<Chess>(CastlingMode::Chess960)
                    .map_err(drop)
            }) {
                let mut ours = Vec::new();
                lakefish_engine::fen::write_fen(&p960, &mut ours);
                let theirs = Fen::from_position(&p960, EnPassantMode::Legal).to_string();
                if ours != theirs.as_bytes() {
                    return Err(format!("960: write_fen {:?} != {theirs:?}", text(&ours)));
                }
            }
            match (check_move(fen, uci), move_facts(fen, uci)) {
                (Ok(()), Ok(_)) => Ok(Verdict::Accepted),
                (Err(a), Err(b)) if a == b => fen_error(a),
                (a, b) => Err(format!("check_move {a:?} but move_facts {b:?}")),
            }
        }),
    }
}

// ---------------------------------------------------------------- books

fn book() -> Target {
    let mut seeds = words(&[
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - c0 \"x\";\n\n# c\nr1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3\n",
        "[Event \"a\"]\n\n1. e4 {best} e5 (1... c5 2. Nf3) 2. Nf3!? Nc6 $1 *\n\n[Event \"b\"]\n[FEN \"4k3/8/8/8/8/8/4P3/4K3 w - - 0 1\"]\n\n1. e4 Kd7 *\n",
    ]);
    seeds.push(synthetic_pgn(3, 4, false).0.into_bytes());
    for f in [
        "openings/4mvs_+90_+99.epd",
        "openings/noob_2moves.epd",
        "openings/startpos.epd",
    ] {
        if let Some(b) = shared(f) {
            let end = b
                .iter()
                .enumerate()
                .filter(|(_, c)| **c == b'\n')
                .nth(30)
                .map_or(b.len(), |(i, _)| i + 1);
            seeds.push(b[..end].to_vec());
        }
    }
    Target {
        name: "book",
        seeds,
        dict: words(&[
            "[FEN \"",
            "[Event \"",
            "\"]\n",
            "{",
            "}",
            "(",
            ")",
            "O-O",
            "1-0",
            "\n",
            "#",
            "c0",
            "bm",
        ]),
        text: true,
        structured: None,
        max_len: 16 << 10,
        check: Box::new(|data| {
            let lines = text(data).lines().count().max(1);
            let mut verdict = Verdict::Accepted;
            for name in ["fuzz.epd", "fuzz.pgn"] {
                let Err(e) = Book::parse(name, data) else {
                    continue;
                };
                verdict = Verdict::Refused;
                let shown = e.to_string();
                if !shown.starts_with(&format!("book {name}")) {
                    return Err(format!("error names no book: {shown}"));
                }
                let reason = match &e {
                    BookError::Line { line, reason, .. } if (1..=lines).contains(line) => reason,
                    BookError::Game { game, reason, .. } if *game >= 1 => reason,
                    BookError::Empty(_) | BookError::NotText(_) => continue,
                    _ => return Err(format!("error names no place in the book: {shown}")),
                };
                // Book errors reach API callers: they must not quote the file.
                let t = text(data);
                if let Some(quoted) = t
                    .split_whitespace()
                    .find(|w| w.len() >= 12 && reason.contains(w))
                {
                    return Err(format!("error quotes the book ({quoted:?}): {shown}"));
                }
            }
            Ok(verdict)
        }),
    }
}

// ---------------------------------------------------------------- job specs

fn job_seeds() -> Vec<Value> {
    let text = [
        r#"{"version":1,"kind":"ingest_binpack","spec":{"inputs":["a.binpack","lake:raw/x.binpack"],"dataset":"d1","rows_per_part":1000}}"#,
        r#"{"kind":"ingest_pgn","spec":{"inputs":["games.pgn.zst"],"dataset":"lichess-2025"}}"#,
        r#"{"kind":"mask","spec":{"dataset":"d1","source":"lichess","definition":{"name":"quiet","min_ply":16,"max_abs_score":3000}}}"#,
        r#"{"kind":"shuffle","spec":{"datasets":["a","b"],"source":"binpack","mask":"quiet","chunks":4,"seed":1,"extra":[{"source":"lichess","dataset":"c"}]}}"#,
        r#"{"kind":"train","spec":{"shuffle":"sh-0123456789ab","features":"halfkp","arch":"256x2-32-32","epochs":2,"lr":0.001,"lambda_start":1.0,"lambda_end":0.5,"device":"cpu","loss":"mse"}}"#,
        r#"{"kind":"train","spec":{"shuffle":"sh-0123456789ab","init_from":{"run":"run-1","step":100}}}"#,
        r#"{"kind":"quantize","spec":{"run":"run-0123","checkpoint":100,"positions":500,"max_mean_cp":3.0,"max_p99_cp":15.0}}"#,
        r#"{"kind":"register","spec":{"run":"run-0123","checkpoint":100,"parent":"nn-0123456789ab"}}"#,
        r#"{"kind":"datagen","spec":{"net":"best","dataset":"sp1","games":10,"seed":3,"depth":4,"random_plies":6,"max_plies":200,"draw_cp":400}}"#,
        r#"{"kind":"sprt","spec":{"new":"nn-0123456789ab","base":"best","book":"lake:raw/books/b.epd","tc":"10+0.1","elo0":0,"elo1":5,"alpha":0.05,"beta":0.05,"model":"logistic","batch_pairs":8,"max_pairs":1000,"concurrency":4,"seed":1}}"#,
        r#"{"kind":"sprt","spec":{"new":"classical","base":"best","book":"b.epd","nodes":5000}}"#,
        r#"{"kind":"shuffle_pile","spec":{"shuffle":"sh-0123456789ab","index":3}}"#,
        r#"{"kind":"sprt_batch","spec":{"sprt":"sprt-1","index":2}}"#,
    ];
    text.iter()
        .map(|t| serde_json::from_str(t).expect("seed JSON"))
        .collect()
}

/// Every key of the seeds, the request's own fields, and what validation messages call
/// fields: an error must name one of them (or a JSON line and column).
fn spec_vocabulary() -> Vec<String> {
    fn keys(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    out.push(k.clone());
                    keys(v, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    job_seeds().iter().for_each(|v| keys(v, &mut out));
    for extra in [
        "time control",
        "resume",
        "batch_size",
        "scale",
        "request body",
        "input ",
        "shuffle id",
    ] {
        out.push(extra.to_string());
    }
    out.sort();
    out.dedup();
    out
}

fn random_json(rng: &mut Rng, vocab: &[String], depth: usize) -> Value {
    match rng.below(if depth > 3 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(2)),
        2 => serde_json::from_str(INTERESTING_NUMBERS[rng.below(INTERESTING_NUMBERS.len())])
            .unwrap_or(Value::from(-1)),
        3 => Value::from(rng.next_u64() as i64 >> rng.below(64)),
        4 => Value::String(
            rng.pick(&[
                "",
                "..",
                "../x",
                "a/b",
                "lake:",
                "lake:raw/",
                "best",
                " ",
                "sh-",
                "x".repeat(70).as_str(),
                "\u{0}",
            ])
            .to_string(),
        ),
        5 => Value::String(rng.pick(vocab).clone()),
        6 => Value::Array(
            (0..rng.below(3))
                .map(|_| random_json(rng, vocab, depth + 1))
                .collect(),
        ),
        7 => Value::Object(
            (0..rng.below(3))
                .map(|_| (rng.pick(vocab).clone(), random_json(rng, vocab, depth + 1)))
                .collect(),
        ),
        _ => {
            // Deep nesting: the parser's recursion limit, not the stack, must stop it.
            let n = 1 + rng.below(300);
            serde_json::from_str(&format!("{}{}", "[".repeat(n), "]".repeat(n)))
                .unwrap_or(Value::Null)
        }
    }
}

/// A JSON-aware mutation: one value somewhere in the document replaced, removed or added.
fn mutate_json(rng: &mut Rng, data: &[u8]) -> Option<Vec<u8>> {
    static VOCAB: OnceLock<Vec<String>> = OnceLock::new();
    let vocab = VOCAB.get_or_init(spec_vocabulary);
    let mut v: Value = serde_json::from_slice(data).ok()?;
    let mut node = &mut v;
    loop {
        let children = match node {
            Value::Object(m) => m.len(),
            Value::Array(a) => a.len(),
            _ => 0,
        };
        if children == 0 || rng.chance(3) {
            break;
        }
        let i = rng.below(children);
        node = match node {
            Value::Object(m) => m.values_mut().nth(i)?,
            Value::Array(a) => &mut a[i],
            _ => unreachable!(),
        };
    }
    match (node, rng.below(3)) {
        (Value::Object(m), 0) if !m.is_empty() => {
            let k = m.keys().nth(rng.below(m.len()))?.clone();
            m.remove(&k);
        }
        (Value::Object(m), 1) => {
            m.insert(rng.pick(vocab).clone(), random_json(rng, vocab, 0));
        }
        (Value::Array(a), 0) if !a.is_empty() => {
            a.remove(rng.below(a.len()));
        }
        (node, _) => *node = random_json(rng, vocab, 0),
    }
    serde_json::to_vec(&v).ok()
}

fn check_spec_error(e: &SpecError, vocab: &[String]) -> Result<(), String> {
    let located = match e {
        SpecError::Json(m) => m.contains("line ") && m.contains("column "),
        // A field named in the message, or a path into an array (`[0]: ...`).
        SpecError::Invalid { message, .. } => {
            message.starts_with('[') || vocab.iter().any(|w| message.contains(w.as_str()))
        }
        _ => true,
    };
    if located {
        Ok(())
    } else {
        Err(format!("spec error names no field: {e}"))
    }
}

fn job_spec() -> Target {
    let vocab = spec_vocabulary();
    Target {
        name: "job_spec",
        seeds: job_seeds()
            .iter()
            .map(|v| serde_json::to_vec(v).unwrap())
            .collect(),
        dict: vocab
            .iter()
            .map(|w| format!("\"{w}\"").into_bytes())
            .collect(),
        text: true,
        structured: Some(mutate_json),
        max_len: 8 << 10,
        check: Box::new(move |data| {
            // Accepted when either door takes it: internal kinds only come through the queue.
            let mut verdict = Verdict::Refused;
            match JobSpec::from_request(data) {
                Ok(spec) => {
                    let _ = spec.inputs();
                    let queued = QueuedJob::new(JobId::derived("fuzz"), &spec);
                    if queued.spec().as_ref() != Ok(&spec) {
                        return Err(format!("queued spec reads back as {:?}", queued.spec()));
                    }
                    verdict = Verdict::Accepted;
                }
                Err(e) => check_spec_error(&e, &vocab)?,
            }
            // The same value as a queue payload (internal kinds allowed there).
            if let Ok(Value::Object(mut m)) = serde_json::from_slice::<Value>(data) {
                m.remove("version");
                let job = QueuedJob {
                    version: 1,
                    id: JobId::derived("fuzz"),
                    spec: Value::Object(m),
                };
                match job.spec() {
                    Ok(_) => verdict = Verdict::Accepted,
                    Err(e) => check_spec_error(&e, &vocab)?,
                }
            }
            Ok(verdict)
        }),
    }
}

fn sprt_tc() -> Target {
    Target {
        name: "sprt_tc",
        seeds: words(&["10+0.1", "60", "0.5+0", "86400+86400", "1+"]),
        dict: words(&["+", ".", "-", "e", "inf", " "]),
        text: true,
        structured: None,
        max_len: 256,
        check: Box::new(|data| match parse_tc(&text(data)) {
            Ok((base, inc)) if base == 0 || base > 86_400_000 || inc > 86_400_000 => {
                Err(format!("accepted out of range: {base}+{inc} ms"))
            }
            Ok(_) => Ok(Verdict::Accepted),
            Err(e) if e.starts_with("time control ") => Ok(Verdict::Refused),
            Err(e) => Err(format!("error does not name the time control: {e}")),
        }),
    }
}

// ---------------------------------------------------------------- config

fn config() -> Target {
    let example = include_str!("../../../infra/lakefish.toml");
    let seeds = vec![
        example.as_bytes().to_vec(),
        b"version = 1\n[server]\nlisten = \"127.0.0.1:9\"\nmax_body_bytes = 1000\n".to_vec(),
        b"LAKEFISH__AUTH__ANONYMOUS_READ=true\nLAKEFISH__SERVER__LISTEN=0.0.0.0:1\nversion = 1\n"
            .to_vec(),
    ];
    Target {
        name: "config",
        seeds,
        dict: words(&[
            "version = 1\n",
            "[server]\n",
            "[[auth.tokens]]\n",
            "[pipelines.p]\n",
            "[pipelines.p.train]\n",
            "LAKEFISH__",
            "__",
            "=",
            "\"",
            "'''",
            "[",
            "]",
            "{",
            "}",
            "chunks",
            "book",
            "schedule",
        ]),
        text: true,
        structured: None,
        max_len: 16 << 10,
        check: Box::new(|data| {
            let t = text(data);
            // Lines `LAKEFISH__...=...` are the environment; the rest is the file.
            let (env, file): (Vec<&str>, Vec<&str>) =
                t.lines().partition(|l| l.starts_with("LAKEFISH__"));
            let env: Vec<(String, String)> = env
                .iter()
                .map(|l| {
                    let (k, v) = l.split_once('=').unwrap_or((l, ""));
                    (k.to_string(), v.to_string())
                })
                .collect();
            match Config::parse("fuzz.toml", &file.join("\n"), env) {
                Ok(_) => Ok(Verdict::Accepted),
                Err(e) => {
                    let shown = e.to_string();
                    let located = shown.starts_with("fuzz.toml: ")
                        && match &e {
                            ConfigError::Parse { message, .. } => {
                                message.contains("line ")
                                    || message.contains("version")
                                    || message.starts_with("LAKEFISH__")
                            }
                            ConfigError::Version { .. } => true,
                            ConfigError::Invalid { key, .. } => !key.is_empty() && key != ".",
                        };
                    if located {
                        Ok(Verdict::Refused)
                    } else {
                        Err(format!("config error names no place: {shown}"))
                    }
                }
            }
        }),
    }
}
