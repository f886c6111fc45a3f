//! Minimal dependency-free SVG line charts for experiment results: one chart, several named
//! series, linear x, linear or logarithmic y, axis ticks and a legend.

use std::fmt::Write;

/// A named series of (x, y) points; non-finite y values are skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Points in x order.
    pub points: Vec<(f64, f64)>,
}

/// Chart labels and scale.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Title.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic y axis.
    pub log_y: bool,
}

impl Chart {
    /// A chart with a linear y axis (`Chart { log_y: true, ..Chart::new(…) }` for a
    /// logarithmic one).
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> Self {
        Self { title: title.into(), x_label: x_label.into(), y_label: y_label.into(), log_y: false }
    }
}

const W: f64 = 720.0;
const H: f64 = 440.0;
const L: f64 = 80.0;
const R: f64 = 170.0;
const T: f64 = 40.0;
const B: f64 = 60.0;
const COLORS: [&str; 8] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// Renders `series` as an SVG document.
pub fn svg(chart: &Chart, series: &[Series]) -> String {
    let pts = series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|(x, y)| x.is_finite() && y.is_finite() && (!chart.log_y || *y > 0.0));
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 1.0, 10.0);
    }
    if (x1 - x0).abs() < f64::EPSILON {
        x1 = x0 + 1.0;
    }
    let fy = |y: f64| if chart.log_y { y.log10() } else { y };
    let (mut ly0, mut ly1) = (fy(y0), fy(y1));
    if chart.log_y {
        ly0 = ly0.floor();
        ly1 = ly1.ceil().max(ly0 + 1.0);
    } else {
        ly0 = ly0.min(0.0);
        if (ly1 - ly0).abs() < f64::EPSILON {
            ly1 = ly0 + 1.0;
        }
        ly1 *= 1.05;
    }
    let sx = |x: f64| L + (x - x0) / (x1 - x0) * (W - L - R);
    let sy = |y: f64| H - B - (fy(y) - ly0) / (ly1 - ly0) * (H - T - B);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        (W - R + L) / 2.0,
        esc(&chart.title)
    );
    let _ = write!(
        s,
        r#"<line x1="{L}" y1="{b}" x2="{r}" y2="{b}" stroke="black"/><line x1="{L}" y1="{T}" x2="{L}" y2="{b}" stroke="black"/>"#,
        b = H - B,
        r = W - R
    );
    for i in 0..=5 {
        let x = x0 + (x1 - x0) * f64::from(i) / 5.0;
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            sx(x),
            H - B + 18.0,
            fmt_num(x)
        );
    }
    let ticks: Vec<f64> = if chart.log_y {
        (ly0 as i32..=ly1 as i32).map(|e| 10f64.powi(e)).collect()
    } else {
        (0..=5).map(|i| ly0 + (ly1 - ly0) * f64::from(i) / 5.0).collect()
    };
    for y in ticks {
        let py = sy(y);
        let _ = write!(
            s,
            r##"<line x1="{L}" y1="{py:.1}" x2="{r}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            L - 6.0,
            py + 4.0,
            fmt_num(y),
            r = W - R
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(18,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (W - R + L) / 2.0,
        H - 16.0,
        esc(&chart.x_label),
        (H - B + T) / 2.0,
        esc(&chart.y_label)
    );
    for (i, se) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = se
            .points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite() && (!chart.log_y || *y > 0.0))
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        if !path.is_empty() {
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
                path.join(" ")
            );
            for p in &path {
                let (px, py) = p.split_once(',').unwrap_or(("0", "0"));
                let _ = write!(s, r#"<circle cx="{px}" cy="{py}" r="2.5" fill="{color}"/>"#);
            }
        }
        let ly = T + 10.0 + 20.0 * i as f64;
        let _ = write!(
            s,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            W - R + 15.0,
            W - R + 35.0,
            W - R + 40.0,
            ly + 4.0,
            esc(&se.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(0.01..100_000.0).contains(&a) {
        format!("{v:.0e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_series_and_skips_non_finite_points() {
        let chart = Chart {
            title: "p99 <latency>".into(),
            x_label: "load".into(),
            y_label: "µs".into(),
            log_y: true,
        };
        let series = vec![
            Series {
                name: "a".into(),
                points: vec![(0.5, 10.0), (0.9, 1000.0), (1.0, f64::INFINITY)],
            },
            Series { name: "b".into(), points: vec![] },
        ];
        let out = svg(&chart, &series);
        assert!(out.starts_with("<svg") && out.ends_with("</svg>\n"));
        assert!(out.contains("p99 &lt;latency&gt;"));
        assert_eq!(out.matches("<polyline").count(), 1);
        assert_eq!(out.matches("<circle").count(), 2);
    }
}
