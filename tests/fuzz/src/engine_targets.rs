//! Targets for what other engines and their users hand lakefish: a side of a match
//! (`ENGINE[+NET][,OPTION=VALUE...]`, from the command line or a job spec) and the `info`
//! lines a UCI engine prints.

use crate::harness::{Target, Verdict};
use lakefish_engine::search::Score;
use lakefish_engine::uci_client::parse_score;
use lakefish_schemas::engines::parse_side;

fn words(list: &[&str]) -> Vec<Vec<u8>> {
    list.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// A side either parses into names and options that are safe to send as UCI lines, or is
/// refused naming the side.
pub fn sprt_side() -> Target {
    Target {
        name: "sprt_side",
        seeds: words(&[
            "stockfish",
            "nn-0123456789ab.nnue",
            "stockfish+best,UCI_LimitStrength=true,UCI_Elo=1500",
            "sf,Hash=16,Threads=1",
            "lakefish+classical",
        ]),
        dict: words(&[
            ",", "+", "=", "\n", "\r", " value ", " name ", "\0", "..", "/",
        ]),
        text: true,
        structured: None,
        max_len: 2048,
        check: Box::new(|data| {
            let text = String::from_utf8_lossy(data);
            match parse_side(&text) {
                Ok(side) => {
                    let bad = |s: &str| s.chars().any(char::is_control);
                    let odd = |s: &str| s.chars().any(|c| c.is_control() || c.is_whitespace());
                    if side.head.is_empty()
                        || odd(&side.head)
                        || side.net.as_deref().is_some_and(odd)
                    {
                        return Err(format!("accepted a side without a usable head: {side:?}"));
                    }
                    for (k, v) in &side.options {
                        if bad(k) || bad(v) || k.split_whitespace().any(|w| w == "value") {
                            return Err(format!("accepted an option that breaks UCI: {k:?}={v:?}"));
                        }
                    }
                    Ok(Verdict::Accepted)
                }
                Err(e) if e.starts_with("side ") || e.contains("option") => Ok(Verdict::Refused),
                Err(e) => Err(format!("error does not name the side: {e}")),
            }
        }),
    }
}

/// `info` lines: a score is read only from a well-formed `score cp|mate N`, within range.
pub fn uci_info() -> Target {
    Target {
        name: "uci_info",
        seeds: words(&[
            "info depth 12 seldepth 16 multipv 1 score cp 31 nodes 20000 nps 1000 pv e2e4 e7e5",
            "info depth 5 score mate -3 pv a1a2",
            "info depth 1 score cp 10 lowerbound",
            "info string NNUE evaluation using nn-ad9b42354671.nnue enabled",
        ]),
        dict: words(&["score", "cp", "mate", "-", "2147483648", " ", "wdl"]),
        text: true,
        structured: None,
        max_len: 4096,
        check: Box::new(|data| match parse_score(&String::from_utf8_lossy(data)) {
            Some(Score::Cp(cp)) if cp.abs() > 100_000 => Err(format!("cp {cp} out of range")),
            Some(_) => Ok(Verdict::Accepted),
            None => Ok(Verdict::Refused),
        }),
    }
}
