//! Progress of a run's steps: a trait the pipeline reports to, a silent implementation, and
//! indicatif bars drawn on stderr only when it is a terminal.

use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What the pipeline tells about its progress.
pub trait Progress: Sync {
    /// A step starts; `total` units (cells, images) are to come.
    fn begin(&self, step: &str, total: u64);
    /// `n` more units are done.
    fn advance(&self, n: u64);
    /// The step is over.
    fn end(&self);
}

/// Reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Progress for Silent {
    fn begin(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn end(&self) {}
}

/// One indicatif bar per step on stderr; hidden when stderr is not a terminal.
#[derive(Debug, Default)]
pub struct Bars {
    bar: Mutex<Option<ProgressBar>>,
}

impl Progress for Bars {
    fn begin(&self, step: &str, total: u64) {
        let bar = if std::io::stderr().is_terminal() {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{msg:>8} [{elapsed_precise}] {wide_bar} {pos}/{len} ({eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            b.set_style(style);
            b.set_message(step.to_string());
            b
        } else {
            ProgressBar::hidden()
        };
        if let Ok(mut g) = self.bar.lock() {
            *g = Some(bar);
        }
    }

    fn advance(&self, n: u64) {
        if let Ok(g) = self.bar.lock() {
            if let Some(b) = g.as_ref() {
                b.inc(n);
            }
        }
    }

    fn end(&self) {
        if let Ok(mut g) = self.bar.lock() {
            if let Some(b) = g.take() {
                b.finish_and_clear();
            }
        }
    }
}
