//! Progress bars for jobs run from the terminal.

use indicatif::{ProgressBar, ProgressStyle};
use lakefish_jobs::ProgressSink;
use lakefish_schemas::Progress;

pub struct Bar(ProgressBar);

impl Bar {
    pub fn new() -> Self {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {msg:40!} [{bar:30}] {percent:>3}% {elapsed_precise} eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        Bar(bar)
    }

    pub fn show(&self, p: &Progress) {
        if let Some(total) = p.total {
            self.0.set_length(total);
        }
        self.0.set_position(p.done);
        let msg = if p.rows > 0 {
            format!("{} ({} rows)", p.stage, p.rows)
        } else {
            p.stage.clone()
        };
        self.0.set_message(msg);
    }

    pub fn finish(&self) {
        self.0.finish();
    }
}

impl ProgressSink for Bar {
    fn report(&self, p: &Progress) {
        self.show(p);
    }
}
