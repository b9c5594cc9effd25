//! A log-log SVG of µs per object against the number of mutators: one panel per workload, one
//! line per engine and mix (colour = mix, solid = outfit, dashed = Gatekeeper). Plain SVG text.

use std::fmt::Write;

/// One line: its label, colour, whether dashed, and its points (mutators, µs).
pub(crate) struct Series {
    pub(crate) label: String,
    pub(crate) colour: &'static str,
    pub(crate) dashed: bool,
    pub(crate) points: Vec<(f64, f64)>,
}

pub(crate) struct Panel {
    pub(crate) title: String,
    pub(crate) series: Vec<Series>,
}

const PANEL_W: f64 = 520.0;
const PANEL_H: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const LEGEND_H: f64 = 130.0;

pub(crate) fn svg(title: &str, panels: &[Panel]) -> String {
    let points = || panels.iter().flat_map(|p| &p.series).flat_map(|s| &s.points);
    let decade = |v: f64, up: bool| if up { v.log10().ceil() } else { v.log10().floor() };
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points().filter(|(x, y)| *x > 0.0 && *y > 0.0 && y.is_finite()) {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (1.0, 10.0, 1.0, 10.0);
    }
    let (x0, x1) = (decade(x0, false), decade(x1, true).max(decade(x0, false) + 1.0));
    let (y0, y1) = (decade(y0, false), decade(y1, true).max(decade(y0, false) + 1.0));
    let width = PANEL_W * panels.len().max(1) as f64;
    let height = PANEL_H + LEGEND_H;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="14">{}</text>"#,
        width / 2.0,
        escape(title)
    );
    for (index, panel) in panels.iter().enumerate() {
        let ox = index as f64 * PANEL_W;
        let (px0, px1) = (ox + LEFT, ox + PANEL_W - RIGHT);
        let (py0, py1) = (PANEL_H - BOTTOM, TOP);
        let sx = |x: f64| px0 + (x.log10() - x0) / (x1 - x0) * (px1 - px0);
        let sy = |y: f64| py0 - (y.log10() - y0) / (y1 - y0) * (py0 - py1);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="13">{}</text>"#,
            (px0 + px1) / 2.0,
            TOP - 8.0,
            escape(&panel.title)
        );
        // Grid and decade labels.
        for d in (x0 as i32)..=(x1 as i32) {
            let x = sx(10f64.powi(d));
            let _ = writeln!(
                s,
                r##"<line x1="{x}" y1="{py1}" x2="{x}" y2="{py0}" stroke="#ddd"/>"##
            );
            let _ = writeln!(
                s,
                r#"<text x="{x}" y="{}" text-anchor="middle">{}</text>"#,
                py0 + 16.0,
                label(10f64.powi(d))
            );
        }
        for d in (y0 as i32)..=(y1 as i32) {
            let y = sy(10f64.powi(d));
            let _ = writeln!(
                s,
                r##"<line x1="{px0}" y1="{y}" x2="{px1}" y2="{y}" stroke="#ddd"/>"##
            );
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
                px0 - 6.0,
                y + 4.0,
                label(10f64.powi(d))
            );
        }
        let _ = writeln!(
            s,
            r#"<rect x="{px0}" y="{py1}" width="{}" height="{}" fill="none" stroke="black"/>"#,
            px1 - px0,
            py0 - py1
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">mutators</text>"#,
            (px0 + px1) / 2.0,
            py0 + 34.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" transform="rotate(-90 {} {})">CPU µs per object</text>"#,
            ox + 18.0,
            (py0 + py1) / 2.0,
            ox + 18.0,
            (py0 + py1) / 2.0
        );
        for series in &panel.series {
            let path: Vec<String> = series
                .points
                .iter()
                .filter(|(x, y)| *x > 0.0 && *y > 0.0 && y.is_finite())
                .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
                .collect();
            if path.is_empty() {
                continue;
            }
            let dash = if series.dashed {
                r#" stroke-dasharray="6 4""#
            } else {
                ""
            };
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
                path.join(" "),
                series.colour
            );
            for point in &path {
                let (x, y) = point.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(s, r#"<circle cx="{x}" cy="{y}" r="3" fill="{}"/>"#, series.colour);
            }
        }
        // Legend under the panel.
        for (i, series) in panel.series.iter().enumerate() {
            let (lx, ly) = (
                px0 + (i % 2) as f64 * 230.0,
                PANEL_H + 10.0 + (i / 2) as f64 * 20.0,
            );
            let dash = if series.dashed {
                r#" stroke-dasharray="6 4""#
            } else {
                ""
            };
            let _ = writeln!(
                s,
                r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/>"#,
                lx + 28.0,
                series.colour
            );
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}">{}</text>"#,
                lx + 34.0,
                ly + 4.0,
                escape(&series.label)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

fn label(v: f64) -> String {
    if v >= 1.0 {
        thousands(v.round() as u64)
    } else {
        format!("{v}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `n` with commas between groups of three digits.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
