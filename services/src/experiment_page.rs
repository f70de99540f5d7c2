//! The dashboard's experiments: the list, and one experiment's page with its table, an Elo
//! chart with error bars and the cells' training curves overlaid.

use std::fmt::Write;

use axum::extract::State;
use lakefish_schemas::experiment::{ExperimentId, ExperimentState, ExperimentStatus};

use crate::api::{ApiError, ApiPath, AppState};
use crate::charts::escape;
use crate::dashboard::{Page, layout, net_link, run_link, state_badge, when};
use crate::list_pages::COLOURS;

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

fn matches_done(s: &ExperimentStatus) -> String {
    if s.state == ExperimentState::Training {
        return "–".into();
    }
    format!(
        "{}/{}",
        s.pairings.iter().filter(|p| p.done).count(),
        s.pairings.len()
    )
}

pub(crate) async fn list(State(s): State<AppState>) -> Page {
    let all = lakefish_jobs::experiment::list(&s.lake).await?;
    let busy = all.iter().any(|e| !e.state.is_final());
    let mut b = String::from(
        "<p>An experiment trains a net per cell of a base recipe and axes to vary, then rates \
         them together: <code>lakefish experiment run FILE</code> (docs/EXPERIMENTS.md), or \
         an <code>experiment</code> job through <code>POST /v1/jobs</code>.</p>",
    );
    if all.is_empty() {
        b.push_str("<p>No experiments yet.</p>");
    } else {
        b.push_str("<table><tr><th>experiment</th><th>state</th><th>cells</th><th>matches</th><th>best cell (Elo)</th><th>created</th></tr>");
        for e in &all {
            let best = e
                .table
                .iter()
                .filter(|r| r.elo.is_some() && r.cell.is_some())
                .max_by(|a, b| {
                    a.elo
                        .partial_cmp(&b.elo)
                        .unwrap_or(std::cmp::Ordering::Equal)
                })
                .map(|r| format!("{} ({:+.1})", escape(&r.player), r.elo.unwrap_or_default()))
                .unwrap_or_default();
            let _ = write!(
                b,
                r#"<tr><td><a href="/ui/experiments/{id}">{id}</a></td><td>{}</td><td class="num">{}/{}</td><td class="num">{}</td><td>{best}</td><td>{}</td></tr>"#,
                state_badge(e.state.as_str()),
                e.cells_done,
                e.cells,
                matches_done(e),
                when(&e.created),
                id = escape(&e.id),
            );
        }
        b.push_str("</table>");
    }
    Ok(layout("Experiments", "/ui/experiments", busy, &b))
}

pub(crate) async fn one(State(s): State<AppState>, ApiPath(id): ApiPath<String>) -> Page {
    let id = ExperimentId::new(&id).map_err(|e| ApiError::NotFound(e.to_string()))?;
    let e = lakefish_jobs::experiment::status(&s.lake, &id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("experiment {id}")))?;
    let mut b = format!(
        "<p>{} · cells {}/{} · matches {} · created {} · updated {}</p>",
        state_badge(e.state.as_str()),
        e.cells_done,
        e.cells,
        matches_done(&e),
        when(&e.created),
        when(&e.updated),
    );
    if let Some(err) = &e.error {
        let _ = write!(b, r#"<p class="error">{}</p>"#, escape(err));
    }
    if e.table.is_empty() {
        b.push_str("<p>The table appears once every cell is trained and every match played.</p>");
    } else {
        let anchor = e.players.get(e.anchor).map_or("?", String::as_str);
        let rows: Vec<crate::charts::Rated> = e
            .table
            .iter()
            .enumerate()
            .map(|(i, r)| crate::charts::Rated {
                name: &r.player,
                color: colour(i),
                value: r.elo.zip(r.elo_error),
            })
            .collect();
        b.push_str(&crate::charts::interval_chart(
            &format!("Elo relative to {anchor} (95 % intervals)"),
            "Elo",
            &rows,
        ));
        b.push_str("<table class=\"compare\"><tr><th>player</th><th>plays</th><th>Elo</th><th>games</th><th>score</th><th>val loss</th><th>material val loss</th><th>quantized, mean cp</th><th>move accuracy</th><th>puzzles solved</th><th>nodes/s (× classical)</th><th>run</th></tr>");
        for (i, r) in e.table.iter().enumerate() {
            let c = r.cell.as_ref();
            let num = |v: Option<f64>, d: usize| v.map_or(String::new(), |v| format!("{v:.d$}"));
            let _ = write!(
                b,
                r#"<tr><td><span style="color:{}">■</span> {}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td></tr>"#,
                colour(i),
                escape(&r.player),
                net_link(&r.plays),
                match (r.elo, r.elo_error) {
                    (Some(v), Some(err)) => format!("{v:+.1} ± {err:.1}"),
                    _ => "–".into(),
                },
                r.games,
                num(r.score, 3),
                num(c.and_then(|c| c.val_loss), 5),
                num(c.and_then(|c| c.material_val_loss), 5),
                num(c.and_then(|c| c.quantized_mean_cp), 2),
                num(c.and_then(|c| c.move_accuracy), 3),
                num(c.and_then(|c| c.puzzle_accuracy), 3),
                c.map_or(String::new(), |c| format!(
                    "{:.0} ({:.2})",
                    c.nodes_per_s, c.nodes_per_s_ratio
                )),
                c.map_or(String::new(), |c| run_link(&c.run)),
            );
        }
        b.push_str("</table>");
        if let Some(n) = &e.note {
            let _ = write!(b, "<p>{}</p>", escape(n));
        }
        let _ = write!(
            b,
            r#"<p><a href="/v1/experiments/{id}/table.csv">table.csv</a> · <a href="/v1/experiments/{id}">status JSON</a></p>"#,
            id = escape(&e.id)
        );
    }
    // The cells' training curves, overlaid (the runs are known once each cell is in).
    let mut series = Vec::new();
    for c in lakefish_jobs::experiment::recorded_cells(&s.lake, &e.id).await? {
        if let Some(run) = lakefish_jobs::nets::run_with_metrics(&s.lake, &c.run).await? {
            series.push((c.index as usize, c.label.clone(), run));
        }
    }
    if !series.is_empty() {
        let lines = |pick: fn(&lakefish_jobs::nets::MetricsPoint) -> Option<f64>| {
            series
                .iter()
                .map(|(i, name, run)| crate::charts::Series {
                    name,
                    color: colour(*i),
                    points: run
                        .metrics
                        .iter()
                        .filter_map(|m| Some((m.step as f64, pick(m)?)))
                        .collect(),
                })
                .collect::<Vec<_>>()
        };
        b.push_str(&crate::charts::log_chart(
            "Validation loss of each cell",
            "step",
            "loss",
            &lines(|m| m.val_loss),
            &[],
        ));
        b.push_str(&crate::charts::log_chart(
            "Training loss of each cell",
            "step",
            "loss",
            &lines(|m| Some(m.train_loss)),
            &[],
        ));
    }
    let _ = write!(
        b,
        "<h2>Matches</h2><table><tr><th>pairing</th><th>W</th><th>D</th><th>L</th><th>pentanomial</th><th>test</th></tr>"
    );
    for p in &e.pairings {
        let name = |i: usize| escape(e.players.get(i).map_or("?", String::as_str));
        let _ = write!(
            b,
            r#"<tr><td>{} – {}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td>{:?}</td><td>{}</td></tr>"#,
            name(p.a),
            name(p.b),
            p.wins,
            p.draws,
            p.losses,
            p.penta,
            p.sprt.as_ref().map_or(String::new(), |id| format!(
                r#"<a href="/ui/sprt/{id}">{id}</a>"#,
                id = escape(id)
            )),
        );
    }
    b.push_str("</table>");
    Ok(layout(
        &format!("Experiment {}", e.id),
        "/ui/experiments",
        !e.state.is_final(),
        &b,
    ))
}
