//! A child process's output, read as it comes: tests wait for a line to appear instead of
//! polling a log file on a timer.

use std::io::{BufRead, BufReader, Read};
use std::process::Child;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What a child wrote on stdout and stderr (merged, line by line) so far.
#[derive(Clone, Default)]
pub struct Output(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    text: String,
    /// Streams still open.
    open: usize,
}

impl Output {
    /// Takes the child's piped stdout and stderr (those not piped are skipped) and reads
    /// them on two threads until they close.
    pub fn follow(child: &mut Child) -> Self {
        let streams: Vec<Box<dyn Read + Send>> = [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        .collect();
        Self::read(streams)
    }

    /// Reads `streams` (merged, line by line) on one thread each until they close.
    pub fn read(streams: Vec<Box<dyn Read + Send>>) -> Self {
        let out = Self::default();
        out.0.state.lock().unwrap().open = streams.len();
        for s in streams {
            let shared = out.0.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s);
                let mut line = Vec::new();
                while matches!(r.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                    shared.state.lock().unwrap().text.push_str(&String::from_utf8_lossy(&line));
                    shared.changed.notify_all();
                    line.clear();
                }
                shared.state.lock().unwrap().open -= 1;
                shared.changed.notify_all();
            });
        }
        out
    }

    /// Everything read so far.
    pub fn text(&self) -> String {
        self.0.state.lock().unwrap().text.clone()
    }

    /// Blocks until `pred` holds for the text read so far; `false` once the streams closed
    /// without it or `timeout` passed.
    pub fn wait_blocking(&self, timeout: Duration, pred: impl Fn(&str) -> bool) -> bool {
        let st = self.0.state.lock().unwrap();
        let (st, _) = self.0.changed.wait_timeout_while(st, timeout, |s| !pred(&s.text) && s.open > 0).unwrap();
        pred(&st.text)
    }

    /// [`Self::wait_blocking`] off the async runtime's threads.
    pub async fn wait(&self, timeout: Duration, pred: impl Fn(&str) -> bool + Send + 'static) -> bool {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.wait_blocking(timeout, pred)).await.unwrap()
    }

    /// Blocks until both streams closed (the child exited and its output is all read).
    pub fn wait_closed(&self, timeout: Duration) -> bool {
        let st = self.0.state.lock().unwrap();
        let (st, _) = self.0.changed.wait_timeout_while(st, timeout, |s| s.open > 0).unwrap();
        st.open == 0
    }
}
