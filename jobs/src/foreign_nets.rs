//! Nets in formats other engines load: importing a Stockfish 15.1 net into the registry, and
//! evaluating positions with any registered net in the units its engine prints.

use crate::nets::{index_net, read_net};
use crate::{JobError, Lake};
use lakefish_engine::eval::Evaluator;
use lakefish_engine::stockfish_net::{FILE_HASH, SfEvaluation, StockfishNet};
use lakefish_schemas::NetManifest;
use lakefish_schemas::layout::Layout;
use lakefish_schemas::nets::{NetFormat, QuantizationError, name_for_sha256, net_keys};
use lakefish_schemas::netspec::NetSpec;
use shakmaty::fen::Fen;
use shakmaty::{CastlingMode, Chess, Position};

/// The architecture name imported Stockfish nets are registered under.
pub const STOCKFISH_ARCH: &str = "stockfish-15.1";

/// Registers the bytes of a Stockfish 15.1 net, unchanged, under `nn-<sha256[:12]>.nnue` (the
/// name Stockfish itself derives from the same bytes), lineage external. Refuses anything
/// else, naming what differs. Idempotent: the same bytes return the existing manifest.
pub async fn import_stockfish(lake: &Lake, bytes: Vec<u8>) -> Result<NetManifest, JobError> {
    let net = StockfishNet::from_bytes(&bytes).map_err(|e| JobError::Payload(e.to_string()))?;
    let external = External {
        features: "halfka_v2_hm".into(),
        arch: STOCKFISH_ARCH.into(),
        arch_hash: format!("{FILE_HASH:#010x}"),
        description: String::from_utf8_lossy(&net.description).into_owned(),
        format: NetFormat::Stockfish,
        net: NetSpec::preset("halfka_v2_hm", STOCKFISH_ARCH).ok(),
    };
    register_external(lake, bytes, external).await
}

/// What an external net's manifest says of the net itself.
struct External {
    features: String,
    arch: String,
    arch_hash: String,
    description: String,
    format: NetFormat,
    net: Option<NetSpec>,
}

/// Registers an external net's bytes under `nn-<sha256[:12]>.nnue`, no lineage. Idempotent:
/// the same bytes return the existing manifest.
async fn register_external(
    lake: &Lake,
    bytes: Vec<u8>,
    e: External,
) -> Result<NetManifest, JobError> {
    let sha = crate::nets::sha256_hex(&bytes);
    let name = name_for_sha256(&sha);
    if let Some(existing) = read_net(lake, &name).await? {
        index_net(lake, &existing).await?;
        return Ok(existing);
    }
    let manifest = NetManifest {
        name,
        sha256: sha,
        bytes: bytes.len() as u64,
        features: e.features,
        arch: e.arch,
        arch_hash: e.arch_hash,
        description: e.description,
        run: String::new(),
        checkpoint: String::new(),
        step: 0,
        shuffle: String::new(),
        datasets: Vec::new(),
        mask: String::new(),
        parent: None,
        quantization: QuantizationError::default(),
        created: lakefish_lake::records::now(),
        format: e.format,
        external: true,
        net: e.net,
    };
    store(lake, manifest, bytes).await
}

/// Writes an external net's file, then its manifest (a manifest never names a file that is
/// not there), and indexes it; a manifest written meanwhile by another import wins.
async fn store(
    lake: &Lake,
    manifest: NetManifest,
    bytes: Vec<u8>,
) -> Result<NetManifest, JobError> {
    let name = manifest.name.clone();
    let (file_key, manifest_key) = net_keys(&name);
    lake.put(&file_key, bytes).await?;
    let json = serde_json::to_vec_pretty(&manifest)?;
    let manifest = if lake.put_if_absent(&manifest_key, json).await? {
        manifest
    } else {
        read_net(lake, &name)
            .await?
            .ok_or_else(|| JobError::Retry(format!("{manifest_key} vanished")))?
    };
    index_net(lake, &manifest).await?;
    Ok(manifest)
}

/// The net a file in `layout` holds: `given`, or else the NetSpec the file describes itself
/// with (a layout with a `spec` header item, such as lakefish's `.nnue`).
pub fn layout_net(
    file: &[u8],
    layout: &Layout,
    given: Option<NetSpec>,
) -> Result<NetSpec, JobError> {
    if let Some(spec) = given {
        return Ok(spec);
    }
    lakefish_engine::layout::embedded_spec(file, layout)
        .map_err(|e| JobError::Payload(e.to_string()))?
        .ok_or_else(|| {
            JobError::Payload(format!(
                "layout {:?} does not say which net a file holds: give its NetSpec (nets import --spec)",
                layout.name.as_deref().unwrap_or("(unnamed)")
            ))
        })
}

/// Registers a net written elsewhere in a saved layout (a bullet `quantised.bin`, ...) as the
/// NetSpec `spec` describes it, lineage external. The registry holds it in lakefish's `.nnue`
/// (what the engine loads; exporting it in `layout` again gives `file`'s bytes back); the
/// description records the layout and the original file's sha256. Refuses a file whose size,
/// header or padding differ from the layout, or whose values the description's types cannot
/// hold, naming what differs; nothing is stored then. Idempotent.
pub async fn import_layout(
    lake: &Lake,
    file: &[u8],
    layout: &Layout,
    spec: NetSpec,
) -> Result<NetManifest, JobError> {
    let source = crate::nets::sha256_hex(file);
    let comment = format!(
        "imported from {} bytes in layout {:?} (sha256 {source})",
        file.len(),
        layout.name.as_deref().unwrap_or("(unnamed)")
    );
    let mut tensors = lakefish_engine::layout::read(file, layout, spec)
        .map_err(|e| JobError::Payload(e.to_string()))?;
    if lakefish_engine::layout::is_stockfish(&tensors.spec) {
        // Stockfish's own format, as `--format stockfish` registers it.
        let sf = tensors
            .into_stockfish()
            .and_then(|n| {
                n.to_bytes()
                    .map_err(|e| lakefish_engine::nnue::NnueError::Header(e.to_string()))
            })
            .map_err(|e| JobError::Payload(e.to_string()))?;
        return import_stockfish(lake, sf).await;
    }
    if layout.header.iter().any(|h| h.description.is_some()) {
        // Kept as read, so export gives the file's bytes again.
        if std::str::from_utf8(&tensors.description).is_err() {
            return Err(JobError::Payload(
                "layout: the file's description is not UTF-8, which a lakefish net's comment must be"
                    .into(),
            ));
        }
    } else {
        tensors.description = comment.into_bytes();
    }
    let net = tensors
        .into_spec_net()
        .map_err(|e| JobError::Payload(e.to_string()))?;
    let external = External {
        features: "netspec".into(),
        arch: net.spec.name.clone().unwrap_or_else(|| "(unnamed)".into()),
        arch_hash: String::new(),
        description: net.comment.clone(),
        format: NetFormat::Lakefish,
        net: Some(net.spec.clone()),
    };
    register_external(lake, net.to_bytes(), external).await
}

/// A registered net's bytes (a described net, a preset, a Stockfish 15.1 net) written in
/// `layout`, refusing a net the layout does not fit (naming the tensor).
pub fn export_layout(
    manifest: &NetManifest,
    bytes: &[u8],
    layout: &Layout,
) -> Result<Vec<u8>, JobError> {
    let net = lakefish_engine::layout::described(bytes)
        .map_err(|e| JobError::Payload(format!("net {}: {e}", manifest.name)))?;
    lakefish_engine::layout::write(&net, layout).map_err(|e| {
        JobError::Payload(format!(
            "net {} in layout {:?}: {e}",
            manifest.name,
            layout.name.as_deref().unwrap_or("(unnamed)")
        ))
    })
}

/// Evaluates one FEN with `net` (from [`Evaluator::from_net_bytes`]), from White's side:
/// Stockfish's internal units for a Stockfish net (what its `eval` prints as "NNUE
/// evaluation", times 361), centipawns for a lakefish net.
pub fn evaluate_fen(net: &Evaluator, fen: &str) -> Result<FenEvaluation, String> {
    let pos: Chess = fen
        .parse::<Fen>()
        .map_err(|e| format!("not a FEN: {e}"))?
        .into_position(CastlingMode::Standard)
        .map_err(|e| format!("not a legal position: {e}"))?;
    let turn = pos.turn();
    match net {
        Evaluator::Nnue(net) => {
            let v = net
                .evaluate_board(pos.board(), turn)
                .map_err(|e| e.to_string())?;
            let white = if turn.is_white() { v } else { -v };
            Ok(FenEvaluation { white, sf: None })
        }
        Evaluator::Stockfish(net) => {
            let e = net.evaluate(pos.board(), turn).map_err(|e| e.to_string())?;
            Ok(FenEvaluation {
                white: e.white(turn),
                sf: Some(e),
            })
        }
        Evaluator::Spec(net) => {
            let v = net
                .evaluate_board(pos.board(), turn)
                .map_err(|e| e.to_string())?;
            let white = if turn.is_white() { v } else { -v };
            Ok(FenEvaluation { white, sf: None })
        }
        other => Err(format!("{} is not a net", other.describe())),
    }
}

/// One position's evaluation: White's side, and for a Stockfish net every bucket's parts.
pub struct FenEvaluation {
    pub white: i32,
    pub sf: Option<SfEvaluation>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A described net (a `.nnue` version 2) evaluates a FEN from White's side: the engine's
    /// score for the side to move, negated when Black moves.
    #[test]
    fn described_nets_evaluate_fens() {
        let mut spec = lakefish_schemas::netspec::NetSpec::parse(include_str!(
            "../../infra/nets/bullet-3-input-buckets.toml"
        ))
        .unwrap();
        spec.transformer.width = 64;
        let net = lakefish_engine::spec_net::random_spec_net(spec, 5).unwrap();
        let evaluator = Evaluator::from_net_bytes(&net.to_bytes()).unwrap();
        for fen in [
            "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
            "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 9",
        ] {
            let pos: Chess = fen
                .parse::<Fen>()
                .unwrap()
                .into_position(CastlingMode::Standard)
                .unwrap();
            let stm = net.evaluate_board(pos.board(), pos.turn()).unwrap();
            let white = if pos.turn().is_white() { stm } else { -stm };
            let got = evaluate_fen(&evaluator, fen).unwrap();
            assert_eq!(got.white, white, "{fen}");
            assert!(got.sf.is_none());
        }
    }
}
