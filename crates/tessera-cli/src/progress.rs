//! Progress bars on stderr for long reads and writes. A bar is drawn only when stderr is a
//! terminal and the work is large enough to take a noticeable time; otherwise a hidden bar is
//! returned so callers never branch.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Work below this many bytes gets no bar (it finishes in well under a second).
pub(crate) const MIN_BYTES: u64 = 64 << 20;

/// A byte-counting bar titled `msg`, or a hidden one (stderr not a terminal, or small work).
pub(crate) fn bytes_bar(total: u64, msg: &str) -> ProgressBar {
    if total < MIN_BYTES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{msg} [{elapsed_precise}] {wide_bar} {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(msg.to_string());
    bar
}
