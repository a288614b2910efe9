//! A small, dependency-free SVG writer for grouped bar charts, used to draw the paper's
//! Figures 12 and 13 (beam and cube queries) from our Table 3 (see `docs/multimap.md`).
//!
//! This module owns the chart's geometry (linear or log value axis, ticks, bars, markers, legend)
//! and its SVG text: labels are XML-escaped and every number is printed with a fixed precision,
//! so the same [`BarChart`] always gives the same bytes. Which values go into which figure is
//! [`crate::table3`]'s business.

use anyhow::{ensure, Result};
use std::fmt::Write as _;

/// How bar values map to heights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Heights proportional to the value; the axis starts at 0.
    Linear,
    /// Heights proportional to `log10(value / bottom)`; the axis runs from the decade below the
    /// smallest value to a decade above the largest, with a tick per decade. For values that
    /// span orders of magnitude (0.03 and 5 ms per cell); every bar also carries its value as text.
    Log,
}

/// One kind of bar: a colour and a legend entry, one bar per group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Fill colour, e.g. `#2166ac`.
    pub color: String,
}

/// One bar: its value and optionally a marker, a black tick across the bar at a second value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    /// The bar's height.
    pub value: f64,
    /// Where the tick goes, if any.
    pub marker: Option<f64>,
}

/// One group of bars on the x axis, one bar per [`Series`], in series order.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Text under the group.
    pub label: String,
    /// The bars.
    pub bars: Vec<Bar>,
}

/// A grouped bar chart.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    /// Text above the chart.
    pub title: String,
    /// Text along the value axis.
    pub y_label: String,
    /// Linear or log value axis.
    pub scale: Scale,
    /// The kinds of bar, in their order inside each group.
    pub series: Vec<Series>,
    /// Legend text for the markers (omitted when `None`).
    pub marker_name: Option<String>,
    /// The groups, left to right.
    pub groups: Vec<Group>,
}

const WIDTH: f64 = 800.0;
const PLOT_LEFT: f64 = 80.0;
const PLOT_RIGHT: f64 = 780.0;
const PLOT_TOP: f64 = 60.0;
const PLOT_BOTTOM: f64 = 350.0;
const LEGEND_TOP: f64 = 395.0;
const LEGEND_ROW: f64 = 20.0;
/// Share of a group's width taken by its bars (the rest separates groups).
const GROUP_FILL: f64 = 0.8;
/// Share of a bar's slot that is filled.
const BAR_FILL: f64 = 0.8;
/// How far a marker sticks out on either side of its bar, so it shows on a dark bar too.
const MARKER_OVERHANG: f64 = 2.5;

/// A number as bar-label text: 3 decimals below 0.1, 2 below 100, none above.
pub(crate) fn format_value(x: f64) -> String {
    if x < 0.1 {
        format!("{x:.3}")
    } else if x < 100.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.0}")
    }
}

/// `s` with `&`, `<`, `>`, `"` and `'` replaced by their XML entities.
pub(crate) fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// 1, 2 or 5 times a power of ten, the smallest at or above `x > 0`.
fn nice_step(x: f64) -> f64 {
    let p = 10f64.powf(x.log10().floor());
    let m = x / p;
    let f = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    f * p
}

/// The value axis: the range `lo..=hi` drawn from `PLOT_BOTTOM` up to `PLOT_TOP`, and its ticks
/// with their labels.
#[derive(Debug, Clone, PartialEq)]
struct Axis {
    scale: Scale,
    lo: f64,
    hi: f64,
    ticks: Vec<(f64, String)>,
}

impl Axis {
    /// An axis for `values` (finite; positive on a log axis) with room above the largest one
    /// for its label.
    fn new(scale: Scale, values: &[f64]) -> Result<Self> {
        ensure!(!values.is_empty(), "a chart needs at least one value");
        for &v in values {
            ensure!(v.is_finite(), "value {v} is not finite");
            match scale {
                Scale::Linear => ensure!(v >= 0.0, "value {v} is negative"),
                Scale::Log => ensure!(v > 0.0, "value {v} cannot go on a log axis"),
            }
        }
        let max = values.iter().copied().fold(f64::MIN, f64::max);
        Ok(match scale {
            Scale::Linear => {
                // about six round ticks
                let step = nice_step((max * 1.1).max(f64::MIN_POSITIVE) / 6.0);
                let n = (max * 1.1 / step).ceil().max(1.0) as u32;
                let decimals = usize::try_from(-(step.log10().floor() as i32)).unwrap_or(0);
                let ticks = (0..=n).map(|i| f64::from(i) * step).map(|t| (t, format!("{t:.decimals$}"))).collect();
                Self { scale, lo: 0.0, hi: f64::from(n) * step, ticks }
            }
            Scale::Log => {
                let min = values.iter().copied().fold(f64::MAX, f64::min);
                // strictly below the smallest value, so that its bar has a height
                let mut e_lo = min.log10().floor() as i32;
                if 10f64.powi(e_lo) >= min {
                    e_lo -= 1;
                }
                let e_hi = ((max * 1.5).log10().ceil() as i32).max(e_lo + 1);
                let ticks = (e_lo..=e_hi)
                    .map(|e| {
                        let t = 10f64.powi(e);
                        let decimals = usize::try_from(-e).unwrap_or(0);
                        (t, format!("{t:.decimals$}"))
                    })
                    .collect();
                Self { scale, lo: 10f64.powi(e_lo), hi: 10f64.powi(e_hi), ticks }
            }
        })
    }

    /// Where `v` sits between the bottom (0) and the top (1) of the axis.
    fn frac(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => (v / self.lo).log10() / (self.hi / self.lo).log10(),
        }
    }

    /// The SVG y coordinate of `v`.
    fn y(&self, v: f64) -> f64 {
        PLOT_BOTTOM - self.frac(v) * (PLOT_BOTTOM - PLOT_TOP)
    }
}

impl BarChart {
    /// Total height of the SVG: the plot, the group labels and the legend rows.
    fn height(&self) -> f64 {
        let rows = self.series.len().div_ceil(2) + usize::from(self.marker_name.is_some());
        LEGEND_TOP + LEGEND_ROW * rows as f64 + 10.0
    }

    /// The chart as an SVG document.
    ///
    /// # Errors
    /// A group whose bar count differs from the series count, no bars at all, or a value that
    /// is not finite, negative, or (on a log axis) zero.
    pub fn to_svg(&self) -> Result<String> {
        let mut values = Vec::new();
        for g in &self.groups {
            ensure!(
                g.bars.len() == self.series.len(),
                "group {:?} has {} bars for {} series",
                g.label,
                g.bars.len(),
                self.series.len()
            );
            values.extend(g.bars.iter().flat_map(|b| std::iter::once(b.value).chain(b.marker)));
        }
        let axis = Axis::new(self.scale, &values)?;
        let height = self.height();
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:.0}" height="{height:.0}" viewBox="0 0 {WIDTH:.0} {height:.0}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r##"<rect x="0" y="0" width="{WIDTH:.0}" height="{height:.0}" fill="#ffffff"/>"##);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="28" text-anchor="middle" font-size="16" font-weight="bold">{}</text>"#,
            WIDTH / 2.0,
            escape_xml(&self.title)
        );
        self.write_axis(&mut s, &axis);
        self.write_bars(&mut s, &axis);
        self.write_legend(&mut s);
        s.push_str("</svg>\n");
        Ok(s)
    }

    /// Grid lines and labels at the ticks, the two axis lines, the axis label and the group labels.
    fn write_axis(&self, s: &mut String, axis: &Axis) {
        for (t, label) in &axis.ticks {
            let y = axis.y(*t);
            let _ = writeln!(
                s,
                r##"<line class="grid" x1="{PLOT_LEFT:.1}" y1="{y:.2}" x2="{PLOT_RIGHT:.1}" y2="{y:.2}" stroke="#dddddd"/>"##
            );
            let _ = writeln!(
                s,
                r#"<text class="tick" x="{:.1}" y="{:.2}" text-anchor="end">{}</text>"#,
                PLOT_LEFT - 6.0,
                y + 4.0,
                escape_xml(label)
            );
        }
        let _ = writeln!(
            s,
            r##"<line x1="{PLOT_LEFT:.1}" y1="{PLOT_TOP:.1}" x2="{PLOT_LEFT:.1}" y2="{PLOT_BOTTOM:.1}" stroke="#000000"/>"##
        );
        let _ = writeln!(
            s,
            r##"<line x1="{PLOT_LEFT:.1}" y1="{PLOT_BOTTOM:.1}" x2="{PLOT_RIGHT:.1}" y2="{PLOT_BOTTOM:.1}" stroke="#000000"/>"##
        );
        let mid = (PLOT_TOP + PLOT_BOTTOM) / 2.0;
        let _ = writeln!(
            s,
            r#"<text x="22" y="{mid:.1}" text-anchor="middle" transform="rotate(-90 22 {mid:.1})">{}</text>"#,
            escape_xml(&self.y_label)
        );
        let group_w = (PLOT_RIGHT - PLOT_LEFT) / self.groups.len().max(1) as f64;
        for (g, group) in self.groups.iter().enumerate() {
            let _ = writeln!(
                s,
                r#"<text class="group" x="{:.2}" y="{:.1}" text-anchor="middle">{}</text>"#,
                PLOT_LEFT + (g as f64 + 0.5) * group_w,
                PLOT_BOTTOM + 20.0,
                escape_xml(&group.label)
            );
        }
    }

    /// One `rect` per bar (with a tooltip), its marker and its value above it.
    fn write_bars(&self, s: &mut String, axis: &Axis) {
        let group_w = (PLOT_RIGHT - PLOT_LEFT) / self.groups.len().max(1) as f64;
        let slot = group_w * GROUP_FILL / self.series.len().max(1) as f64;
        let bar_w = slot * BAR_FILL;
        for (g, group) in self.groups.iter().enumerate() {
            let x0 = PLOT_LEFT + g as f64 * group_w + group_w * (1.0 - GROUP_FILL) / 2.0;
            for (i, (series, bar)) in self.series.iter().zip(&group.bars).enumerate() {
                let x = x0 + i as f64 * slot + (slot - bar_w) / 2.0;
                let y = axis.y(bar.value);
                let _ = writeln!(
                    s,
                    r#"<rect class="bar" x="{x:.2}" y="{y:.2}" width="{bar_w:.2}" height="{:.2}" fill="{}"><title>{}: {}</title></rect>"#,
                    PLOT_BOTTOM - y,
                    escape_xml(&series.color),
                    escape_xml(&format!("{} {}", group.label, series.name)),
                    format_value(bar.value)
                );
                let mut top = y;
                if let Some(m) = bar.marker {
                    let ym = axis.y(m);
                    top = top.min(ym);
                    let _ = writeln!(
                        s,
                        r##"<line class="marker" x1="{:.2}" y1="{ym:.2}" x2="{:.2}" y2="{ym:.2}" stroke="#000000" stroke-width="2.5"/>"##,
                        x - MARKER_OVERHANG,
                        x + bar_w + MARKER_OVERHANG
                    );
                }
                let _ = writeln!(
                    s,
                    r#"<text class="value" x="{:.2}" y="{:.2}" text-anchor="middle" font-size="10">{}</text>"#,
                    x + bar_w / 2.0,
                    top - 4.0,
                    format_value(bar.value)
                );
            }
        }
    }

    /// Two series per row under the plot, then the marker's entry on a row of its own.
    fn write_legend(&self, s: &mut String) {
        let col_w = (PLOT_RIGHT - PLOT_LEFT) / 2.0;
        for (i, series) in self.series.iter().enumerate() {
            let x = PLOT_LEFT + (i % 2) as f64 * col_w;
            let y = LEGEND_TOP + (i / 2) as f64 * LEGEND_ROW;
            let _ = writeln!(
                s,
                r#"<rect class="swatch" x="{x:.1}" y="{:.1}" width="14" height="14" fill="{}"/>"#,
                y - 11.0,
                escape_xml(&series.color)
            );
            let _ = writeln!(s, r#"<text x="{:.1}" y="{y:.1}">{}</text>"#, x + 20.0, escape_xml(&series.name));
        }
        if let Some(name) = &self.marker_name {
            let y = LEGEND_TOP + self.series.len().div_ceil(2) as f64 * LEGEND_ROW;
            let _ = writeln!(
                s,
                r##"<line x1="{PLOT_LEFT:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#000000" stroke-width="2.5"/>"##,
                y - 4.0,
                PLOT_LEFT + 14.0,
                y - 4.0
            );
            let _ = writeln!(s, r#"<text x="{:.1}" y="{y:.1}">{}</text>"#, PLOT_LEFT + 20.0, escape_xml(name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(scale: Scale, groups: &[(&str, &[f64])]) -> BarChart {
        let n = groups.first().map_or(0, |g| g.1.len());
        BarChart {
            title: "t".into(),
            y_label: "ms".into(),
            scale,
            series: (0..n).map(|i| Series { name: format!("s{i}"), color: "#123456".into() }).collect(),
            marker_name: None,
            groups: groups
                .iter()
                .map(|(label, values)| Group {
                    label: (*label).into(),
                    bars: values.iter().map(|&value| Bar { value, marker: None }).collect(),
                })
                .collect(),
        }
    }

    /// Names of the tags in `svg`, checking that every opened tag is closed in order; returns the
    /// names of the top-level elements.
    fn top_level_elements(svg: &str) -> Vec<String> {
        let mut stack: Vec<String> = Vec::new();
        let mut top = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let end = rest[start..].find('>').expect("tag closed") + start;
            let tag = &rest[start + 1..end];
            assert!(!tag.contains('<'), "'<' inside tag {tag:?}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "unbalanced </{name}>");
            } else {
                let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
                if stack.is_empty() {
                    top.push(name.clone());
                }
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
            rest = &rest[end + 1..];
        }
        assert!(stack.is_empty(), "unclosed {stack:?}");
        top
    }

    /// The value of attribute `attr` in every element that starts with `prefix`.
    fn attrs(svg: &str, prefix: &str, attr: &str) -> Vec<f64> {
        svg.split(prefix)
            .skip(1)
            .map(|e| {
                let at = e.find(&format!(" {attr}=\"")).expect("attribute") + attr.len() + 3;
                e[at..at + e[at..].find('"').expect("quoted")].parse().expect("a number")
            })
            .collect()
    }

    #[test]
    fn tags_balance_under_one_svg_root() {
        let mut c = chart(Scale::Log, &[("a", &[0.03, 5.0]), ("b", &[2.7, 1.5])]);
        c.marker_name = Some("calc".into());
        c.groups[0].bars[1].marker = Some(4.3);
        let svg = c.to_svg().expect("valid");
        assert_eq!(top_level_elements(&svg), ["svg"]);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert_eq!(svg.matches("<svg").count(), 1);
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        // the same chart gives the same bytes
        assert_eq!(c.to_svg().expect("valid"), svg);
    }

    #[test]
    fn one_bar_per_value_with_height_proportional_to_value() {
        let values = [1.0, 2.0, 3.0, 4.0, 0.5, 0.0];
        let c = chart(Scale::Linear, &[("a", &values[..3]), ("b", &values[3..])]);
        let svg = c.to_svg().expect("valid");
        let heights = attrs(&svg, "<rect class=\"bar\"", "height");
        assert_eq!(heights.len(), values.len());
        // max 4 plus 10% headroom, ticks of 1: the axis runs to 5, so 1 ms is 290/5 = 58 px
        for (h, v) in heights.iter().zip(values) {
            assert!((h - v * 58.0).abs() < 0.006, "value {v}: height {h}");
        }
        let ys = attrs(&svg, "<rect class=\"bar\"", "y");
        assert!((ys[3] - (PLOT_BOTTOM - 232.0)).abs() < 0.006, "bar top {}", ys[3]);
        // bars sit on the x axis, side by side inside their group, groups left to right
        let xs = attrs(&svg, "<rect class=\"bar\"", "x");
        assert!(xs.windows(2).all(|w| w[0] < w[1]));
        assert!(xs[0] > PLOT_LEFT && xs[5] < PLOT_RIGHT);
        // each bar's value is written above it
        for v in ["1.00", "4.00", "0.50", "0.000"] {
            assert!(svg.contains(&format!(">{v}</text>")), "{v}");
        }
        let ticks: Vec<f64> = attrs(&svg, "<text class=\"tick\"", "y");
        assert_eq!(ticks.len(), 6);
    }

    #[test]
    fn log_axis_has_a_tick_per_decade_evenly_spaced() {
        let axis = Axis::new(Scale::Log, &[0.03, 0.1, 5.2]).expect("valid");
        let labels: Vec<&str> = axis.ticks.iter().map(|t| t.1.as_str()).collect();
        // from the decade below 0.03 to the one above 1.5 x 5.2
        assert_eq!(labels, ["0.01", "0.1", "1", "10"]);
        let ys: Vec<f64> = axis.ticks.iter().map(|t| axis.y(t.0)).collect();
        assert!((ys[0] - PLOT_BOTTOM).abs() < 1e-9 && (ys[3] - PLOT_TOP).abs() < 1e-9);
        let step = (PLOT_BOTTOM - PLOT_TOP) / 3.0;
        for w in ys.windows(2) {
            assert!((w[0] - w[1] - step).abs() < 1e-9);
        }
        // heights are proportional to log10(v / 0.01): 0.1 is one decade of three
        let c = chart(Scale::Log, &[("a", &[0.03, 0.1, 5.2])]);
        let svg = c.to_svg().expect("valid");
        let heights = attrs(&svg, "<rect class=\"bar\"", "height");
        for (h, v) in heights.iter().zip([0.03f64, 0.1, 5.2]) {
            assert!((h - step * (v / 0.01).log10()).abs() < 0.006, "value {v}: height {h}");
        }
        let tick_ys = attrs(&svg, "<text class=\"tick\"", "y");
        assert_eq!(tick_ys.len(), 4);
        assert!((tick_ys[1] - (ys[1] + 4.0)).abs() < 0.006);
        assert!(svg.contains(">0.01</text>") && svg.contains(">10</text>"));
        // a smallest value on a decade still gets a bar: the axis starts a decade lower
        let axis = Axis::new(Scale::Log, &[1.0, 3.0]).expect("valid");
        assert_eq!(axis.ticks.first().map(|t| t.1.as_str()), Some("0.1"));
        assert!(axis.y(1.0) < PLOT_BOTTOM - 1.0);
    }

    #[test]
    fn linear_axis_ticks_are_round() {
        let axis = Axis::new(Scale::Linear, &[174.0, 2680.0]).expect("valid");
        let labels: Vec<&str> = axis.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["0", "500", "1000", "1500", "2000", "2500", "3000"]);
        let axis = Axis::new(Scale::Linear, &[0.03, 0.2]).expect("valid");
        assert_eq!(axis.ticks.last().map(|t| t.1.as_str()), Some("0.25"));
        for (x, step) in [(0.88, 1.0), (1.0, 1.0), (1.2, 2.0), (300.0, 500.0), (6000.0, 10000.0)] {
            assert!((nice_step(x) - step).abs() < 1e-9 * step, "nice_step({x}) = {}", nice_step(x));
        }
    }

    #[test]
    fn markers_sit_at_their_value_and_the_label_clears_them() {
        let mut c = chart(Scale::Linear, &[("a", &[4.0])]);
        c.groups[0].bars[0].marker = Some(2.0);
        c.marker_name = Some("model".into());
        let svg = c.to_svg().expect("valid");
        // axis to 5: 2 ms is 116 px above the x axis
        let y1 = attrs(&svg, "<line class=\"marker\"", "y1");
        assert_eq!(y1.len(), 1);
        assert!((y1[0] - (PLOT_BOTTOM - 116.0)).abs() < 0.006);
        // a marker above the bar pushes its value label above the marker
        c.groups[0].bars[0].marker = Some(4.5);
        let svg = c.to_svg().expect("valid");
        let label_y = attrs(&svg, "<text class=\"value\"", "y");
        assert!((label_y[0] - (PLOT_BOTTOM - 4.5 * 58.0 - 4.0)).abs() < 0.006);
        assert!(svg.contains(">model</text>"));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape_xml(r#"a<b & c>"d'"#), "a&lt;b &amp; c&gt;&quot;d&apos;");
        let mut c = chart(Scale::Linear, &[("x<y & z>w", &[1.0])]);
        c.title = "Naive <& MultiMap>".into();
        c.y_label = "ms <per> cell".into();
        c.series[0].name = "ours & theirs".into();
        let svg = c.to_svg().expect("valid");
        assert!(svg.contains(">Naive &lt;&amp; MultiMap&gt;</text>"));
        assert!(svg.contains(">ms &lt;per&gt; cell</text>"));
        assert!(svg.contains(">x&lt;y &amp; z&gt;w</text>"));
        assert!(svg.contains(">ours &amp; theirs</text>"));
        assert!(!svg.contains("x<y") && !svg.contains("& z") && !svg.contains("<&"));
        assert_eq!(top_level_elements(&svg), ["svg"]);
    }

    #[test]
    fn bad_charts_are_errors() {
        let mut c = chart(Scale::Linear, &[("a", &[1.0, 2.0])]);
        c.groups[0].bars.pop();
        assert!(c.to_svg().is_err());
        assert!(chart(Scale::Log, &[("a", &[0.0, 2.0])]).to_svg().is_err());
        assert!(chart(Scale::Linear, &[("a", &[-1.0, 2.0])]).to_svg().is_err());
        assert!(chart(Scale::Linear, &[("a", &[f64::NAN, 2.0])]).to_svg().is_err());
        assert!(chart(Scale::Linear, &[]).to_svg().is_err());
    }

    #[test]
    fn values_print_with_fixed_precision() {
        assert_eq!(format_value(0.0466), "0.047");
        assert_eq!(format_value(2.0), "2.00");
        assert_eq!(format_value(2575.4), "2575");
    }
}
