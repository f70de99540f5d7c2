//! PGN ingest through the service, checked row by row against python-chess (an independent
//! PGN reader) reading the same file: FEN, move, score, result and ply of every row.

use lakefish_schemas::JobState;
use lakefish_tests::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn queued_pgn_ingest_matches_python_chess_row_for_row() {
    let dir = tempfile::tempdir().unwrap();
    // The real Lichess sample when the checkout has it, else a generated Lichess-style file.
    let input = match shared_data("pgn/lichess_db_1000k.pgn") {
        Some(p) => p,
        None => {
            let p = dir.path().join("synthetic.pgn");
            let (text, _) = lakefish_ingest::pgn::synthetic_pgn(300, 9, false);
            std::fs::write(&p, text).unwrap();
            p
        }
    };
    let (_serve, api) = serve_embedded(dir.path(), None);
    let body = json!({ "kind": "ingest_pgn", "spec": { "inputs": [input.to_str().unwrap()], "dataset": "lichess", "rows_per_part": 5000 } });
    let id = submit_job(&api, &body).await;
    let rec = wait_for_job(&api, &id, Duration::from_secs(120)).await;
    assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
    let rows = rec.result.as_ref().unwrap()["rows"].as_u64().unwrap();

    let lake = dir.path().join("lake");
    let out = std::process::Command::new(venv_bin("python"))
        .arg(workspace_root().join("tests/py/pgn_expected_rows.py"))
        .arg(&input)
        .arg(lake.join("positions/source=lichess/dataset=lichess"))
        .arg(lake.join("games/source=lichess/dataset=lichess"))
        .output()
        .unwrap();
    assert_success(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mismatches"], json!([]), "{v}");
    assert_eq!(v["lake_rows"], v["expected_rows"], "{v}");
    assert_eq!(v["lake_rows"], rows, "{v}");
    assert_eq!(v["lake_games"], v["games"], "{v}");
    assert_eq!(v["lake_scored"], v["expected_scored"], "{v}");
    assert!(
        v["expected_scored"].as_u64().unwrap() > 100,
        "evals present: {v}"
    );

    // DuckDB reads positions and games with their hive columns and joins them on game_id.
    let script = r#"
import sys, json, duckdb
root = sys.argv[1]
con = duckdb.connect()
q = f"""select count(*), count(distinct p.game_id), min(p.month), max(g.white_elo)
from read_parquet('{root}/positions/source=lichess/*/*/*.parquet', hive_partitioning=true) p
join read_parquet('{root}/games/source=lichess/*/*/*.parquet', hive_partitioning=true) g using (game_id)"""
print(json.dumps(con.execute(q).fetchone()))
"#;
    let out = std::process::Command::new(venv_bin("python"))
        .args(["-c", script, lake.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    let joined: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(joined[0], rows, "every row joins its game: {joined}");
    assert!(joined[2].as_str().unwrap().starts_with("20"), "{joined}");
}
