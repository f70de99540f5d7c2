//! Line charts as inline SVG for the dashboard: no JavaScript, no external assets, so a page
//! renders the same in a headless browser, a screenshot or `curl`.

use std::fmt::Write;

pub struct Series<'a> {
    pub name: &'a str,
    pub color: &'a str,
    pub points: Vec<(f64, f64)>,
}

/// A labelled horizontal line, e.g. an SPRT bound.
pub struct Level<'a> {
    pub label: &'a str,
    pub y: f64,
    pub color: &'a str,
}

const W: f64 = 720.0;
const H: f64 = 320.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// About `n` round tick values covering `[lo, hi]` (steps of 1, 2 or 5 times a power of 10).
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 && out.len() < 50 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

fn label(v: f64) -> String {
    if v != 0.0 && (v.abs() >= 1e5 || v.abs() < 1e-3) {
        format!("{v:.1e}")
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// One chart: every series as a polyline (points marked when there are few), every level as a
/// dashed line with its label, axes with round ticks, and a legend. Non-finite points are left
/// out; with no points at all the chart says so instead of drawing empty axes.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    levels: &[Level],
) -> String {
    chart(title, x_label, y_label, series, levels, false)
}

/// [`line_chart`] with a logarithmic y axis: a loss that falls by orders of magnitude in the
/// first steps leaves the later trend visible. Values at or below zero are left out.
pub fn log_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    levels: &[Level],
) -> String {
    let log = |y: f64| if y > 0.0 { y.log10() } else { f64::NAN };
    let series: Vec<Series> = series
        .iter()
        .map(|s| Series {
            name: s.name,
            color: s.color,
            points: s.points.iter().map(|&(x, y)| (x, log(y))).collect(),
        })
        .collect();
    let levels: Vec<Level> = levels
        .iter()
        .map(|l| Level {
            label: l.label,
            y: log(l.y),
            color: l.color,
        })
        .collect();
    chart(
        title,
        x_label,
        &format!("{y_label} (log)"),
        &series,
        &levels,
        true,
    )
}

/// A histogram: one bar per labelled bucket, in the order given, heights as shares of all
/// rows (the y axis in percent), the count in each bar's tooltip. Labels are thinned to about
/// twelve so wide histograms stay readable.
pub fn bar_chart(title: &str, x_label: &str, bars: &[(String, u64)]) -> String {
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{t}"><title>{t}</title><rect width="{W}" height="{H}" fill="#fff"/><text x="{LEFT}" y="18" font-size="14" font-weight="bold">{t}</text>"##,
        t = escape(title)
    );
    let total: u64 = bars.iter().map(|(_, n)| n).sum();
    if total == 0 {
        let _ = write!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="middle" fill="#666">no rows</text></svg>"##,
            W / 2.0,
            H / 2.0
        );
        return svg;
    }
    let share = |n: u64| 100.0 * n as f64 / total as f64;
    let top = bars.iter().map(|(_, n)| share(*n)).fold(0.0, f64::max) * 1.06;
    let plot_w = W - LEFT - RIGHT;
    let step = plot_w / bars.len() as f64;
    let py = |y: f64| H - BOTTOM - y / top * (H - TOP - BOTTOM);
    for t in ticks(0.0, top, 4) {
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#555">{}%</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            py(t) + 4.0,
            label(t),
            y = py(t)
        );
    }
    let every = bars.len().div_ceil(12).max(1);
    for (i, (label, n)) in bars.iter().enumerate() {
        let x = LEFT + i as f64 * step;
        let y = py(share(*n));
        let _ = write!(
            svg,
            r##"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="#3b6ea8"><title>{}: {n} rows ({:.2}%)</title></rect>"##,
            x + step * 0.1,
            (step * 0.8).max(0.5),
            (H - BOTTOM - y).max(0.0),
            escape(label),
            share(*n)
        );
        if i % every == 0 {
            let _ = write!(
                svg,
                r##"<text x="{:.1}" y="{}" font-size="11" text-anchor="middle" fill="#555">{}</text>"##,
                x + step / 2.0,
                H - BOTTOM + 16.0,
                escape(label)
            );
        }
    }
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" x2="{}" y1="{b}" y2="{b}" stroke="#999"/><text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text></svg>"##,
        W - RIGHT,
        LEFT + plot_w / 2.0,
        H - 6.0,
        escape(x_label),
        b = H - BOTTOM
    );
    svg
}

/// Ticks of a log axis over `[lo, hi]` (in log10 units): 1, 2 and 5 times each power of ten
/// inside it, thinned to at most about eight; at least the two ends when no round value fits.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    for k in (lo.floor() as i32)..=(hi.ceil() as i32) {
        for m in [1.0f64, 2.0, 5.0] {
            let t = k as f64 + m.log10();
            if t >= lo && t <= hi {
                out.push(t);
            }
        }
    }
    if out.len() > 8 {
        out.retain(|t| (t - t.round()).abs() < 1e-9);
    }
    if out.len() < 3 {
        // Within a decade: round linear values, placed on the log scale.
        out = ticks(10f64.powf(lo), 10f64.powf(hi), 4)
            .into_iter()
            .filter(|v| *v > 0.0)
            .map(f64::log10)
            .collect();
    }
    out
}

fn chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    levels: &[Level],
    log: bool,
) -> String {
    // On a log axis, values are drawn in log10 units and labelled as themselves.
    let shown = |y: f64| if log { 10f64.powf(y) } else { y };
    let finite = |(x, y): &(f64, f64)| x.is_finite() && y.is_finite();
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied().filter(finite))
        .collect();
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{t}"><title>{t}</title><rect width="{W}" height="{H}" fill="#fff"/><text x="{LEFT}" y="18" font-size="14" font-weight="bold">{t}</text>"##,
        t = escape(title)
    );
    if pts.is_empty() {
        let _ = write!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="middle" fill="#666">no data yet</text></svg>"##,
            W / 2.0,
            H / 2.0
        );
        return svg;
    }
    let (mut x0, mut x1) = (f64::INFINITY, f64::NEG_INFINITY);
    let (mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY);
    for (x, y) in &pts {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y0 = y0.min(*y);
        y1 = y1.max(*y);
    }
    for l in levels.iter().filter(|l| l.y.is_finite()) {
        y0 = y0.min(l.y);
        y1 = y1.max(l.y);
    }
    if x1 - x0 < 1e-12 {
        x0 -= 1.0;
        x1 += 1.0;
    }
    if y1 - y0 < 1e-12 {
        y0 -= 1.0;
        y1 += 1.0;
    }
    let pad = (y1 - y0) * 0.06;
    let (y0, y1) = (y0 - pad, y1 + pad);
    let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - (y - y0) / (y1 - y0) * (H - TOP - BOTTOM);

    // Grid and tick labels.
    let y_ticks = if log {
        log_ticks(y0, y1)
    } else {
        ticks(y0, y1, 5)
    };
    for t in y_ticks {
        let y = py(t);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#444">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            label(shown(t))
        );
    }
    for t in ticks(x0, x1, 6) {
        let x = px(t);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{}" stroke="#f3f3f3"/><text x="{x:.1}" y="{}" font-size="11" text-anchor="middle" fill="#444">{}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 16.0,
            label(t)
        );
    }
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{b}" stroke="#888"/><line x1="{LEFT}" x2="{r}" y1="{b}" y2="{b}" stroke="#888"/><text x="{cx}" y="{}" font-size="12" text-anchor="middle">{}</text><text x="14" y="{cy}" font-size="12" text-anchor="middle" transform="rotate(-90 14 {cy})">{}</text>"##,
        H - 6.0,
        escape(x_label),
        escape(y_label),
        b = H - BOTTOM,
        r = W - RIGHT,
        cx = (LEFT + W - RIGHT) / 2.0,
        cy = (TOP + H - BOTTOM) / 2.0,
    );
    for l in levels.iter().filter(|l| l.y.is_finite()) {
        let y = py(l.y);
        let _ = write!(
            svg,
            r#"<line class="level" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="{c}" stroke-dasharray="6 4"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="{c}">{}</text>"#,
            W - RIGHT,
            W - RIGHT - 4.0,
            y - 4.0,
            escape(l.label),
            c = escape(l.color)
        );
    }
    // The legend follows the title on its line (about 8 px per bold 14 px character).
    let mut legend_x = LEFT + 8.5 * title.chars().count() as f64 + 24.0;
    for s in series {
        let p: Vec<(f64, f64)> = s.points.iter().copied().filter(finite).collect();
        let c = escape(s.color);
        let coords: Vec<String> = p
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline class="series" data-name="{}" fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            escape(s.name),
            coords.join(" ")
        );
        if p.len() <= 60 {
            for (x, y) in &p {
                let _ = write!(
                    svg,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"><title>{}: {}, {}</title></circle>"#,
                    px(*x),
                    py(*y),
                    escape(s.name),
                    label(*x),
                    label(shown(*y))
                );
            }
        }
        let _ = write!(
            svg,
            r#"<rect x="{legend_x}" y="9" width="12" height="4" fill="{c}"/><text x="{}" y="16" font-size="12">{}</text>"#,
            legend_x + 16.0,
            escape(s.name)
        );
        legend_x += 30.0 + 7.0 * s.name.len() as f64;
    }
    svg.push_str("</svg>");
    svg
}

/// One rated player of [`interval_chart`].
pub struct Rated<'a> {
    pub name: &'a str,
    pub color: &'a str,
    /// The estimate and half its interval; `None`: not rated (drawn as a name only).
    pub value: Option<(f64, f64)>,
}

/// Ratings as dots with error bars, one row per player, on a horizontal axis with its zero
/// (the anchor) marked: the experiment page's Elo chart.
pub fn interval_chart(title: &str, x_label: &str, rows: &[Rated]) -> String {
    const NAME: f64 = 220.0;
    let row_h = 26.0;
    let h = TOP + BOTTOM + row_h * rows.len().max(1) as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{t}"><title>{t}</title><rect width="{W}" height="{h}" fill="#fff"/><text x="16" y="18" font-size="14" font-weight="bold">{t}</text>"##,
        t = escape(title)
    );
    let rated: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| r.value)
        .filter(|(v, e)| v.is_finite() && e.is_finite())
        .collect();
    if rated.is_empty() {
        let _ = write!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="middle" fill="#666">not rated yet</text></svg>"##,
            W / 2.0,
            h / 2.0
        );
        return svg;
    }
    let lo = rated.iter().map(|(v, e)| v - e).fold(0.0f64, f64::min);
    let hi = rated.iter().map(|(v, e)| v + e).fold(0.0f64, f64::max);
    let (lo, hi) = if hi - lo < 1e-9 {
        (lo - 1.0, hi + 1.0)
    } else {
        let pad = (hi - lo) * 0.05;
        (lo - pad, hi + pad)
    };
    let px = |x: f64| NAME + (x - lo) / (hi - lo) * (W - NAME - RIGHT);
    let bottom = h - BOTTOM;
    for t in ticks(lo, hi, 6) {
        let x = px(t);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{bottom}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{}</text>"##,
            bottom + 14.0,
            label(t)
        );
    }
    let zero = px(0.0);
    let _ = write!(
        svg,
        r##"<line x1="{zero:.1}" y1="{TOP}" x2="{zero:.1}" y2="{bottom}" stroke="#999" stroke-dasharray="4 3"/><text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#333">{}</text>"##,
        (NAME + W - RIGHT) / 2.0,
        h - 8.0,
        escape(x_label)
    );
    for (i, r) in rows.iter().enumerate() {
        let y = TOP + row_h * (i as f64 + 0.5);
        let name: String = r.name.chars().take(34).collect();
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#333">{}</text>"##,
            NAME - 8.0,
            y + 4.0,
            escape(&name)
        );
        let Some((v, e)) = r.value.filter(|(v, e)| v.is_finite() && e.is_finite()) else {
            continue;
        };
        let (a, b, c) = (px(v - e), px(v), px(v + e));
        let _ = write!(
            svg,
            r##"<line x1="{a:.1}" y1="{y:.1}" x2="{c:.1}" y2="{y:.1}" stroke="{col}" stroke-width="2"/><line x1="{a:.1}" y1="{:.1}" x2="{a:.1}" y2="{:.1}" stroke="{col}" stroke-width="2"/><line x1="{c:.1}" y1="{:.1}" x2="{c:.1}" y2="{:.1}" stroke="{col}" stroke-width="2"/><circle cx="{b:.1}" cy="{y:.1}" r="4.5" fill="{col}"><title>{} {v:+.1} ± {e:.1}</title></circle>"##,
            y - 6.0,
            y + 6.0,
            y - 6.0,
            y + 6.0,
            escape(r.name),
            col = escape(r.color)
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bars in the order given, as shares of all rows (the tallest at the top of its axis),
    /// labels escaped and thinned; no rows says so.
    #[test]
    fn bar_charts_draw_shares() {
        let bars: Vec<(String, u64)> = (0..30).map(|i| (format!("<{i}>"), i)).collect();
        let svg = bar_chart("men", "men", &bars);
        assert_eq!(svg.matches("<rect x=").count(), 30);
        assert!(svg.contains("&lt;29&gt;: 29 rows (6.67%)"), "{svg}");
        assert!(!svg.contains("<29>"));
        // 30 buckets, a label every third.
        assert_eq!(
            svg.matches("text-anchor=\"middle\" fill=\"#555\"").count(),
            10
        );
        assert!(bar_chart("r", "r", &[("win".into(), 0)]).contains("no rows"));
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(-2.944, 2.944, 5);
        assert_eq!(t, vec![-2.0, 0.0, 2.0]);
        let t = ticks(0.0213, 0.0377, 5);
        assert!(t.len() >= 3 && t.iter().all(|v| (0.0213..=0.0377).contains(v)));
    }

    #[test]
    fn chart_draws_series_levels_and_escapes_text() {
        let svg = line_chart(
            "LLR <test>",
            "games",
            "LLR",
            &[Series {
                name: "llr",
                color: "#06c",
                points: vec![(0.0, 0.0), (2.0, 1.5), (4.0, f64::NAN), (6.0, 3.1)],
            }],
            &[
                Level {
                    label: "upper 2.94",
                    y: 2.944,
                    color: "green",
                },
                Level {
                    label: "lower -2.94",
                    y: -2.944,
                    color: "red",
                },
            ],
        );
        assert!(svg.contains("LLR &lt;test&gt;"));
        assert!(!svg.contains("<test>"));
        assert_eq!(svg.matches("class=\"level\"").count(), 2);
        // The NaN point is left out: three points drawn.
        assert_eq!(svg.matches("<circle").count(), 3);
        // y grows upwards: the point at 3.1 sits above (smaller y) the one at 0.
        let poly = svg.split("points=\"").nth(1).unwrap();
        let coords: Vec<f64> = poly
            .split('"')
            .next()
            .unwrap()
            .split(' ')
            .map(|p| p.split(',').nth(1).unwrap().parse().unwrap())
            .collect();
        assert!(coords[2] < coords[0], "{coords:?}");
    }

    #[test]
    fn a_log_axis_spreads_decades_evenly_and_labels_values() {
        let svg = log_chart(
            "loss",
            "step",
            "loss",
            &[Series {
                name: "train",
                color: "#06c",
                points: vec![(0.0, 1.0), (1.0, 0.1), (2.0, 0.01), (3.0, 0.0)],
            }],
            &[],
        );
        // Zero has no logarithm: three points drawn, evenly spaced in height.
        assert_eq!(svg.matches("<circle").count(), 3);
        let poly = svg
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let ys: Vec<f64> = poly
            .split(' ')
            .map(|p| p.split(',').nth(1).unwrap().parse().unwrap())
            .collect();
        assert!(((ys[1] - ys[0]) - (ys[2] - ys[1])).abs() < 0.2, "{ys:?}");
        assert!(svg.contains(">0.1<") && svg.contains(">0.01<"), "{svg}");
        assert!(svg.contains("loss (log)"));
        let t = log_ticks(-2.3, 0.0);
        assert!(
            t.iter().any(|v| (v + 2.0).abs() < 1e-9) && t.len() <= 8,
            "{t:?}"
        );
        // Inside one decade the ticks are round values of it.
        let t: Vec<f64> = log_ticks(0.0296f64.log10(), 0.044f64.log10())
            .into_iter()
            .map(|v| (10f64.powf(v) * 1e4).round() / 1e4)
            .collect();
        assert!(
            t.len() >= 3 && t.contains(&0.03) && t.contains(&0.04),
            "{t:?}"
        );
    }

    #[test]
    fn empty_chart_says_so() {
        let svg = line_chart("loss", "step", "loss", &[], &[]);
        assert!(svg.contains("no data yet"));
        assert!(svg.ends_with("</svg>"));
    }

    /// An interval chart draws one dot and three bar lines per rated player, names the
    /// unrated ones only, escapes names, and says so when nobody is rated.
    #[test]
    fn interval_charts_draw_rated_players_with_bars() {
        let rows = [
            Rated {
                name: "a<b",
                color: "#111",
                value: Some((12.0, 30.0)),
            },
            Rated {
                name: "anchor",
                color: "#222",
                value: Some((0.0, 0.0)),
            },
            Rated {
                name: "lost every game",
                color: "#333",
                value: None,
            },
        ];
        let svg = interval_chart("Elo", "Elo", &rows);
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
        assert!(svg.contains("a&lt;b") && !svg.contains("a<b"), "{svg}");
        assert!(svg.contains("lost every game"));
        let none = interval_chart("Elo", "Elo", &rows[2..]);
        assert!(none.contains("not rated yet"), "{none}");
    }
}
