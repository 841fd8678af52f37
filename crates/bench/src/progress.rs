//! Progress of a run on stderr: an indicatif bar on a terminal, plain
//! time-stamped lines otherwise.

use std::time::Instant;

/// Progress: indicatif on a terminal, plain lines otherwise.
pub struct Progress {
    /// The bar on a terminal.
    pub bar: Option<indicatif::ProgressBar>,
    t0: Instant,
}

impl Progress {
    /// A progress display for `total` sessions.
    pub fn new(total: u64, tty: bool) -> Self {
        let bar = tty.then(|| {
            let b = indicatif::ProgressBar::new(total);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {pos}/{len} sessions  {msg}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            b
        });
        Self {
            bar,
            t0: Instant::now(),
        }
    }
    /// Prints a line.
    pub fn say(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("[{:>6.1}s] {msg}", self.t0.elapsed().as_secs_f64()),
        }
    }
    /// Shows what runs now.
    pub fn step(&self, msg: &str) {
        match &self.bar {
            Some(b) => {
                b.set_message(msg.to_string());
            }
            None => eprintln!("[{:>6.1}s] {msg}", self.t0.elapsed().as_secs_f64()),
        }
    }
    /// One session done.
    pub fn inc(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }
    /// Clears the bar.
    pub fn done(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// Bytes as MiB.
pub fn mib(b: u64) -> f64 {
    b as f64 / 1048576.0
}
